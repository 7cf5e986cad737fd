# PinwheelVenv: where third_party/install-deps.sh puts pinwheel's Python
# virtual environment (nanobind, numpy, pytest, moto, the nvidia-nvjpeg
# wheel), said once for every CMake file that looks for it. Installed beside
# FindPinwheelNvjpeg.cmake, which includes it from its own folder.
#
# pinwheel_default_venv(<out-var>) sets <out-var> in the caller's scope to
# the first of
#   $PINWHEEL_PYTHON_VENV,
#   $PINWHEEL_VENV,
#   $XDG_CACHE_HOME/pinwheel/venv (when XDG_CACHE_HOME is set and not empty),
#   $HOME/.cache/pinwheel/venv.
# It reads environment variables only: a caller that also takes the CMake
# variable PINWHEEL_PYTHON_VENV (samples/python's cache variable) checks it
# first. The folder need not exist; callers test for <venv>/bin/python.
#
# Example:
#   include(PinwheelVenv)
#   pinwheel_default_venv(_venv)
#   if(EXISTS "${_venv}/bin/python") ...
include_guard(GLOBAL)

function(pinwheel_default_venv out_var)
  if(NOT "$ENV{PINWHEEL_PYTHON_VENV}" STREQUAL "")
    set(_venv "$ENV{PINWHEEL_PYTHON_VENV}")
  elseif(NOT "$ENV{PINWHEEL_VENV}" STREQUAL "")
    set(_venv "$ENV{PINWHEEL_VENV}")
  elseif(NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
    set(_venv "$ENV{XDG_CACHE_HOME}/pinwheel/venv")
  else()
    set(_venv "$ENV{HOME}/.cache/pinwheel/venv")
  endif()
  set(${out_var} "${_venv}" PARENT_SCOPE)
endfunction()
