# The GPU architectures pinwheel's kernels are compiled for.
#
# pinwheel_default_cuda_architectures(OUT_VAR): before enable_language(CUDA),
# with CMAKE_CUDA_COMPILER set to nvcc. Sets OUT_VAR to one real (SASS)
# image per major architecture the toolkit supports from Turing (7.5) up, at
# that major's lowest minor, plus PTX for the newest: with CUDA 13.0 on
# x86-64 that is 75-real;80-real;90-real;100-real;120 (the last is real and
# PTX; 11.x, Jetson Thor, only on aarch64).
#
# Note [default CUDA architectures]: a cubin built for X.Y runs on every
# GPU X.Z with Z >= Y, so the lowest minor of each major covers the whole
# major (sm_80 serves A100, A10, L4, RTX 30/40 and Orin; sm_120 the RTX 50
# series and GB10), and the PTX of the newest lets the driver compile for
# GPUs newer than the toolkit. Every GPU from Turing up thus has an image,
# at five SASS images and one PTX per .cu file instead of one image (the
# build-time cost, measured on 2 cores, is in the commit that made this the
# default). A user who wants
# one architecture (faster builds, or sm_86-tuned code) sets
# -DCMAKE_CUDA_ARCHITECTURES=86 (or native, or all-major) or the CUDAARCHS
# environment variable, which CMake honours as ever.
function(pinwheel_default_cuda_architectures out_var)
  execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-code
                  OUTPUT_VARIABLE _codes RESULT_VARIABLE _rc ERROR_QUIET)
  if(NOT _rc EQUAL 0)
    # Not nvcc, or an nvcc too old to list: CMake's own choice.
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  string(REGEX MATCHALL "sm_[0-9]+" _codes "${_codes}")
  set(_majors)
  foreach(_code ${_codes})
    string(REPLACE "sm_" "" _arch "${_code}")
    math(EXPR _major "${_arch} / 10")
    # Turing up; 11.x is Jetson Thor only (an aarch64 SoC), never beside an
    # x86-64 host.
    if(_arch LESS 75 OR (_major EQUAL 11 AND NOT CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64"))
      continue()
    endif()
    if(NOT DEFINED _lowest_${_major} OR _arch LESS _lowest_${_major})
      set(_lowest_${_major} ${_arch})
    endif()
    list(APPEND _majors ${_major})
  endforeach()
  if(NOT _majors)
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  list(REMOVE_DUPLICATES _majors)
  list(SORT _majors COMPARE NATURAL)
  list(POP_BACK _majors _newest)
  set(_archs)
  foreach(_major ${_majors})
    list(APPEND _archs "${_lowest_${_major}}-real")
  endforeach()
  # The newest major's as SASS and PTX (no suffix): the PTX runs, compiled
  # by the driver, on any later GPU.
  list(APPEND _archs "${_lowest_${_newest}}")
  set(${out_var} "${_archs}" PARENT_SCOPE)
endfunction()

# pinwheel_describe_cuda_architectures(OUT_VAR ARCHS): ARCHS (a
# CMAKE_CUDA_ARCHITECTURES value) in nvcc's words, one string without
# semicolons for a compile definition: "75-real;90" -> "sm_75 sm_90
# compute_90". Special values (native, all, all-major) stay as they are.
function(pinwheel_describe_cuda_architectures out_var archs)
  set(_words)
  foreach(_arch ${archs})
    if(_arch MATCHES "^([0-9]+[a-z]?)-real$")
      list(APPEND _words "sm_${CMAKE_MATCH_1}")
    elseif(_arch MATCHES "^([0-9]+[a-z]?)-virtual$")
      list(APPEND _words "compute_${CMAKE_MATCH_1}")
    elseif(_arch MATCHES "^([0-9]+[a-z]?)$")
      list(APPEND _words "sm_${CMAKE_MATCH_1}" "compute_${CMAKE_MATCH_1}")
    else()
      list(APPEND _words "${_arch}")
    endif()
  endforeach()
  list(JOIN _words " " _text)
  set(${out_var} "${_text}" PARENT_SCOPE)
endfunction()
