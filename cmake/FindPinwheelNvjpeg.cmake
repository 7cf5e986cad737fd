# FindPinwheelNvjpeg: nvJPEG, the GPU JPEG decoder's library (transfer/jpeg/).
# Used by pinwheel's own build and shipped with the installed CMake package
# (<prefix>/lib/cmake/pinwheel/), whose pinwheelConfig.cmake finds nvJPEG
# again on the consumer's machine: the package names no path of the machine
# it was built on (issue 31 item 2).
#
# Looks, in this order, in
#   PINWHEEL_NVJPEG_ROOT (a CMake or environment variable): a folder with
#     lib/libnvjpeg.so* (or lib64/) and include/nvjpeg.h;
#   the CUDA toolkit (CUDAToolkit_LIBRARY_DIR / CUDAToolkit_INCLUDE_DIRS when
#     find_package(CUDAToolkit) ran);
#   the nvidia-nvjpeg wheel (site-packages/nvidia/cu13/, older wheels
#     nvidia/nvjpeg/) of Python_EXECUTABLE when set (pip's build environment
#     for the wheel), and of the venv of pinwheel_default_venv()
#     (PinwheelVenv.cmake: $PINWHEEL_PYTHON_VENV, $PINWHEEL_VENV or
#     ${XDG_CACHE_HOME:-~/.cache}/pinwheel/venv, install-deps.sh's).
# PINWHEEL_NVJPEG_REQUIRE_HEADERS ON (pinwheel's build sets it) also requires
# nvjpeg.h; a consumer of the installed package needs the library only.
#
# Defines PinwheelNvjpeg_FOUND, PINWHEEL_NVJPEG_LIBRARY,
# PINWHEEL_NVJPEG_INCLUDE_DIR and the imported target pinwheel::nvjpeg
# (GLOBAL), which pinwheel::transfer links privately: a static
# pinwheel_transfer's export then names $<LINK_ONLY:pinwheel::nvjpeg>, never
# a path.
include(FindPackageHandleStandardArgs)

set(_pinwheel_nvjpeg_roots)
if(PINWHEEL_NVJPEG_ROOT)
  list(APPEND _pinwheel_nvjpeg_roots "${PINWHEEL_NVJPEG_ROOT}")
elseif(DEFINED ENV{PINWHEEL_NVJPEG_ROOT} AND NOT "$ENV{PINWHEEL_NVJPEG_ROOT}" STREQUAL "")
  list(APPEND _pinwheel_nvjpeg_roots "$ENV{PINWHEEL_NVJPEG_ROOT}")
endif()
set(_pinwheel_nvjpeg_wheel_roots)
if(Python_EXECUTABLE)
  # The nvidia namespace package's folders, as the interpreter sees them
  # (pip's isolated build environment included).
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
            "import importlib.util as u; s = u.find_spec('nvidia'); print(';'.join(s.submodule_search_locations) if s else '')"
    OUTPUT_VARIABLE _pinwheel_nvidia_dirs OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _pinwheel_rc ERROR_QUIET)
  if(_pinwheel_rc EQUAL 0)
    foreach(_dir ${_pinwheel_nvidia_dirs})
      list(APPEND _pinwheel_nvjpeg_wheel_roots "${_dir}/cu13" "${_dir}/nvjpeg")
    endforeach()
  endif()
endif()
# From this file's folder: the source tree's cmake/, or the installed
# package's folder, where PinwheelVenv.cmake is installed beside it.
include("${CMAKE_CURRENT_LIST_DIR}/PinwheelVenv.cmake")
pinwheel_default_venv(_pinwheel_venv)
file(GLOB _pinwheel_venv_roots LIST_DIRECTORIES true
     "${_pinwheel_venv}/lib/python3*/site-packages/nvidia/cu13"
     "${_pinwheel_venv}/lib/python3*/site-packages/nvidia/nvjpeg")
list(APPEND _pinwheel_nvjpeg_wheel_roots ${_pinwheel_venv_roots})

set(_pinwheel_include_hints)
set(_pinwheel_lib_hints)
foreach(_root ${_pinwheel_nvjpeg_roots})
  list(APPEND _pinwheel_include_hints "${_root}/include")
  list(APPEND _pinwheel_lib_hints "${_root}/lib" "${_root}/lib64")
endforeach()
list(APPEND _pinwheel_include_hints ${CUDAToolkit_INCLUDE_DIRS})
list(APPEND _pinwheel_lib_hints ${CUDAToolkit_LIBRARY_DIR})
foreach(_root ${_pinwheel_nvjpeg_wheel_roots})
  list(APPEND _pinwheel_include_hints "${_root}/include")
  list(APPEND _pinwheel_lib_hints "${_root}/lib" "${_root}/lib64")
endforeach()

# A cached result whose file is gone (pip's build environment of an earlier
# wheel build, a removed venv) is looked for anew.
foreach(_var PINWHEEL_NVJPEG_LIBRARY PINWHEEL_NVJPEG_INCLUDE_DIR)
  if(${_var} AND NOT EXISTS "${${_var}}")
    unset(${_var} CACHE)
  endif()
endforeach()

# PINWHEEL_NVJPEG_ROOT alone first: CMake's default search (PATH's
# /usr/local/cuda/bin -> /usr/local/cuda/include, ...) comes before HINTS.
set(_pinwheel_names nvjpeg libnvjpeg.so.13 libnvjpeg.so.12)
if(_pinwheel_nvjpeg_roots)
  find_path(PINWHEEL_NVJPEG_INCLUDE_DIR nvjpeg.h
            PATHS ${_pinwheel_nvjpeg_roots} PATH_SUFFIXES include NO_DEFAULT_PATH)
  find_library(PINWHEEL_NVJPEG_LIBRARY NAMES ${_pinwheel_names}
               PATHS ${_pinwheel_nvjpeg_roots} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
endif()
find_path(PINWHEEL_NVJPEG_INCLUDE_DIR nvjpeg.h HINTS ${_pinwheel_include_hints})
find_library(PINWHEEL_NVJPEG_LIBRARY NAMES ${_pinwheel_names} HINTS ${_pinwheel_lib_hints})

set(_pinwheel_required PINWHEEL_NVJPEG_LIBRARY)
if(PINWHEEL_NVJPEG_REQUIRE_HEADERS)
  list(APPEND _pinwheel_required PINWHEEL_NVJPEG_INCLUDE_DIR)
endif()
find_package_handle_standard_args(PinwheelNvjpeg
  REQUIRED_VARS ${_pinwheel_required}
  REASON_FAILURE_MESSAGE
    "nvJPEG (libnvjpeg.so) not found in PINWHEEL_NVJPEG_ROOT='${PINWHEEL_NVJPEG_ROOT}$ENV{PINWHEEL_NVJPEG_ROOT}', the CUDA toolkit or the nvidia-nvjpeg wheel of ${_pinwheel_venv}: pip install nvidia-nvjpeg (CUDA 13) there, or set PINWHEEL_NVJPEG_ROOT to a folder with lib/libnvjpeg.so*")

if(PinwheelNvjpeg_FOUND AND NOT TARGET pinwheel::nvjpeg)
  add_library(pinwheel::nvjpeg SHARED IMPORTED GLOBAL)
  set_target_properties(pinwheel::nvjpeg PROPERTIES
    IMPORTED_LOCATION "${PINWHEEL_NVJPEG_LIBRARY}")
  if(PINWHEEL_NVJPEG_INCLUDE_DIR)
    set_target_properties(pinwheel::nvjpeg PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${PINWHEEL_NVJPEG_INCLUDE_DIR}")
  endif()
endif()
