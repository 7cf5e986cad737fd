// pinwheel.build_info(): how this extension was built (issue 18 item 15),
// from the definitions samples/python/CMakeLists.txt passes.
#include "samples/python/ext/py_build_info.h"

#include <nanobind/stl/string.h>

#include "loader/version.h"
#include "transfer/device.h"

#ifndef PINWHEEL_PY_CUDA_VERSION
#define PINWHEEL_PY_CUDA_VERSION ""
#endif
#ifndef PINWHEEL_PY_CUDA_ARCHITECTURES
#define PINWHEEL_PY_CUDA_ARCHITECTURES ""
#endif
#ifndef PINWHEEL_PY_BUILD_TYPE
#define PINWHEEL_PY_BUILD_TYPE ""
#endif

namespace pinwheel::python {
namespace {

nb::object StringOrNone(const char* s) {
  return s[0] == '\0' ? nb::none() : nb::cast(std::string(s));
}

}  // namespace

nb::dict BuildInfo() {
  nb::dict info;
  info["version"] = PINWHEEL_VERSION_STRING;
  info["backend"] = Device::CudaBackendBuilt() ? "cuda" : "host";
  info["cuda_version"] = StringOrNone(PINWHEEL_PY_CUDA_VERSION);
  info["cuda_architectures"] = StringOrNone(PINWHEEL_PY_CUDA_ARCHITECTURES);
  info["build_type"] = StringOrNone(PINWHEEL_PY_BUILD_TYPE);
  info["compiler"] = std::string(__VERSION__);
  return info;
}

void BindBuildInfo(nb::module_& m) {
  m.def("build_info", &BuildInfo,
        "How this pinwheel was built: {'version': pinwheel's version "
        "(loader/version.h), 'backend': 'cuda' or 'host', "
        "'cuda_version': the CUDA toolkit's version (None without the cuda "
        "backend), 'cuda_architectures', 'build_type', 'compiler'}.");
}

}  // namespace pinwheel::python
