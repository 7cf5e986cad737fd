// pinwheel.build_info(): the backend and CUDA version this extension was
// built with, at run time (pip hides the build's own output unless -v).
//
// Example (Python):
//   >>> pinwheel.build_info()["backend"]
//   'host'
#ifndef PINWHEEL_SAMPLES_PYTHON_EXT_PY_BUILD_INFO_H_
#define PINWHEEL_SAMPLES_PYTHON_EXT_PY_BUILD_INFO_H_

#include <nanobind/nanobind.h>

#include "samples/python/ext/py_support.h"

namespace pinwheel::python {

// Returns {'backend', 'cuda_version', 'cuda_architectures', 'build_type',
// 'compiler', 'versions', 'bundled_libraries', 'gpu_jpeg_decode',
// 'nvjpeg_library'}; the CUDA entries are None without the cuda backend.
// REQUIRES: the GIL.
nb::dict BuildInfo();

// Adds build_info() to the module.
void BindBuildInfo(nb::module_& m);

}  // namespace pinwheel::python

#endif  // PINWHEEL_SAMPLES_PYTHON_EXT_PY_BUILD_INFO_H_
