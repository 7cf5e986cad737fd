# Run by ctest (see CMakeLists.txt here) with cmake -P. Expects:
#   PINWHEEL_BUILD_DIR   the build tree to install
#   PINWHEEL_SOURCE_DIR  the source tree (its path must not leak into the package)
#   CONSUMER_SOURCE_DIR  tests/package/consumer
#   WORK_DIR             a scratch directory (emptied first)
#   GENERATOR, CXX_COMPILER, BUILD_TYPE  for the consumer's build
#   ENABLE_CUDA          whether the package has the CUDA backend
#   SANITIZER            '', 'thread' or 'address', as PINWHEEL_SANITIZER
#   HAVE_NVJPEG, NVJPEG_LIBRARY  whether the package links nvJPEG, and the
#                        library the build used (copied elsewhere for the
#                        consumer, the build's venv hidden)
cmake_minimum_required(VERSION 3.24)

foreach(_var PINWHEEL_BUILD_DIR PINWHEEL_SOURCE_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "check_package.cmake: -D${_var}=... is required")
  endif()
endforeach()

# Runs a command, echoing it, and stops the test when it fails.
function(run_step what)
  string(REPLACE ";" " " _shown "${ARGN}")
  message(STATUS "package test: ${what}: ${_shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "package test: ${what} failed (${_rc})")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(_staged "${WORK_DIR}/staged")
set(_prefix "${WORK_DIR}/prefix")

# 1. Install, then move the tree: a relocatable package works where it lands.
run_step("install" "${CMAKE_COMMAND}" --install "${PINWHEEL_BUILD_DIR}" --prefix "${_staged}")
file(RENAME "${_staged}" "${_prefix}")

# The package's CMake files must not point back into the build or source tree
# or at the staging prefix.
file(GLOB_RECURSE _cmake_files "${_prefix}/*.cmake")
if(NOT _cmake_files)
  message(FATAL_ERROR "package test: no CMake package files under ${_prefix}")
endif()
foreach(_file ${_cmake_files})
  file(READ "${_file}" _text)
  foreach(_path "${PINWHEEL_BUILD_DIR}" "${PINWHEEL_SOURCE_DIR}" "${_staged}")
    string(FIND "${_text}" "${_path}" _at)
    if(NOT _at EQUAL -1)
      message(FATAL_ERROR "package test: ${_file} names ${_path}: not relocatable")
    endif()
  endforeach()
endforeach()

# Nothing outside the prefix and the system may be named by absolute path
# (issue 31 item 2: the build's venv's libnvjpeg.so.13 was): every absolute
# path in the package's CMake files lies under /usr or /lib.
foreach(_file ${_cmake_files})
  file(READ "${_file}" _text)
  string(REGEX MATCHALL "[\"; (](/[A-Za-z0-9_.+-][^\";$ )]*)" _paths "${_text}")
  foreach(_path ${_paths})
    string(SUBSTRING "${_path}" 1 -1 _path)
    if(NOT _path MATCHES "^/(usr|lib|lib64)/")
      message(FATAL_ERROR "package test: ${_file} names ${_path}, outside the prefix and the system: not relocatable")
    endif()
  endforeach()
endforeach()

# The build's venv (where nvJPEG came from) is out of reach of the consumer:
# HOME, PINWHEEL_PYTHON_VENV and PINWHEEL_VENV point elsewhere, and when the
# package has the GPU JPEG decoder, nvJPEG lies in a folder of its own that
# only PINWHEEL_NVJPEG_ROOT names, as on another machine. LD_LIBRARY_PATH
# keeps the machine's own library folders (the GPU machine's staged Debian
# packages live under /opt/deps) but loses every entry inside a venv or the
# project's cache.
set(_ld_kept "")
string(REPLACE ":" ";" _ld_entries "$ENV{LD_LIBRARY_PATH}")
foreach(_entry IN LISTS _ld_entries)
  if(_entry AND NOT _entry MATCHES "venv|/\\.cache/pinwheel|site-packages")
    list(APPEND _ld_kept "${_entry}")
  endif()
endforeach()
string(REPLACE ";" ":" _ld_kept "${_ld_kept}")
set(_hidden_env "${CMAKE_COMMAND}" -E env "HOME=${WORK_DIR}/home"
    "PINWHEEL_PYTHON_VENV=${WORK_DIR}/no-venv" "PINWHEEL_VENV=${WORK_DIR}/no-venv"
    "LD_LIBRARY_PATH=${_ld_kept}" --unset=XDG_CACHE_HOME)
file(MAKE_DIRECTORY "${WORK_DIR}/home")
set(_nvjpeg_args)
if(HAVE_NVJPEG)
  get_filename_component(_nvjpeg_name "${NVJPEG_LIBRARY}" NAME)
  file(MAKE_DIRECTORY "${WORK_DIR}/elsewhere/lib")
  file(COPY_FILE "${NVJPEG_LIBRARY}" "${WORK_DIR}/elsewhere/lib/${_nvjpeg_name}")
  set(_nvjpeg_args "-DPINWHEEL_NVJPEG_ROOT=${WORK_DIR}/elsewhere")
endif()

# 2. Configure and build the consumer against the moved prefix only. It is
# built exactly as the README's CMake snippet shows: its two lines, and no
# C++ standard of its own (pinwheel::pinwheel must require C++20 of its
# consumers).
file(READ "${PINWHEEL_SOURCE_DIR}/README.md" _readme)
file(READ "${CONSUMER_SOURCE_DIR}/CMakeLists.txt" _consumer)
foreach(_line "find_package(pinwheel REQUIRED)"
              "target_link_libraries(your_trainer PRIVATE pinwheel::pinwheel)")
  string(FIND "${_readme}" "${_line}" _at)
  if(_at EQUAL -1)
    message(FATAL_ERROR "package test: README.md's CMake snippet no longer holds '${_line}': update tests/package/consumer (and this check) with it")
  endif()
  string(REPLACE "your_trainer" "pinwheel_consumer" _ours "${_line}")
  string(FIND "${_consumer}" "${_ours}" _at)
  if(_at EQUAL -1)
    message(FATAL_ERROR "package test: the consumer does not hold the README's '${_ours}'")
  endif()
endforeach()
string(REGEX MATCH "CXX_STANDARD|cxx_std_|-std=" _std "${_consumer}")
if(_std)
  message(FATAL_ERROR "package test: the consumer sets a C++ standard of its own (${_std}); the README's snippet does not: pinwheel::pinwheel must carry it")
endif()
set(_consumer_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/consumer-build"
  -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_PREFIX_PATH=${_prefix}"
  "-DEXPECT_CUDA=${ENABLE_CUDA}")
if(BUILD_TYPE)
  list(APPEND _consumer_args "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
endif()
# A sanitizer build installs instrumented libraries: the consumer must link
# the same runtime.
if(SANITIZER STREQUAL "thread")
  list(APPEND _consumer_args "-DCMAKE_CXX_FLAGS=-fsanitize=thread"
                             "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread")
elseif(SANITIZER STREQUAL "address")
  list(APPEND _consumer_args "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined"
                             "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
endif()
run_step("configure consumer" ${_hidden_env} "${CMAKE_COMMAND}" ${_consumer_args} ${_nvjpeg_args})
run_step("build consumer" ${_hidden_env} "${CMAKE_COMMAND}" --build "${WORK_DIR}/consumer-build")

# 3. Run it (its output carries the line ctest looks for).
run_step("run consumer" ${_hidden_env} "${WORK_DIR}/consumer-build/pinwheel_consumer")
run_step("run the README's host loop" ${_hidden_env} "${WORK_DIR}/consumer-build/pinwheel_host_loop")
