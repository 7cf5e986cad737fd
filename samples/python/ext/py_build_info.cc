// pinwheel.build_info(): how this extension was built (issue 18 item 15),
// from the definitions samples/python/CMakeLists.txt passes.
#include "samples/python/ext/py_build_info.h"

#include <algorithm>
#include <dlfcn.h>
#include <filesystem>
#include <link.h>
#include <nanobind/stl/string.h>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"

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
#ifndef PINWHEEL_PY_VERSIONS
#define PINWHEEL_PY_VERSIONS ""
#endif
#ifndef PINWHEEL_PY_HAVE_NVJPEG
#define PINWHEEL_PY_HAVE_NVJPEG 0
#endif

namespace pinwheel::python {
namespace {

nb::object StringOrNone(const char* s) {
  return s[0] == '\0' ? nb::none() : nb::cast(std::string(s));
}

// The libraries auditwheel copied into the wheel: the files of
// <site-packages>/pinwheel_loader.libs/, beside this extension's package
// (an empty list for a build from source, which links the system's).
nb::list BundledLibraries() {
  nb::list result;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&BundledLibraries), &info) == 0 ||
      info.dli_fname == nullptr) {
    return result;
  }
  std::vector<std::string> names;
  const std::filesystem::path libs =
      std::filesystem::path(info.dli_fname).parent_path().parent_path() /
      "pinwheel_loader.libs";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(libs, error)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) result.append(name);
  return result;
}

// The path nvJPEG was loaded from, if this process has it.
nb::object LoadedNvjpeg() {
  std::string path;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("/libnvjpeg.so") == std::string::npos) return 0;
        *static_cast<std::string*>(out) = name;
        return 1;
      },
      &path);
  return path.empty() ? nb::none() : nb::cast(path);
}

}  // namespace

nb::dict BuildInfo() {
  nb::dict info;
  info["version"] = PINWHEEL_VERSION_STRING;
  info["backend"] = Device::CudaBackendBuilt() ? "cuda" : "host";
  info["cuda_version"] = StringOrNone(PINWHEEL_PY_CUDA_VERSION);
  nb::list architectures;
  for (absl::string_view arch :
       absl::StrSplit(PINWHEEL_PY_CUDA_ARCHITECTURES, ' ', absl::SkipEmpty())) {
    architectures.append(std::string(arch));
  }
  info["cuda_architectures"] =
      architectures.size() == 0 ? nb::none() : nb::object(architectures);
  info["build_type"] = StringOrNone(PINWHEEL_PY_BUILD_TYPE);
  info["compiler"] = std::string(__VERSION__);
  nb::dict versions;
  for (absl::string_view pair :
       absl::StrSplit(PINWHEEL_PY_VERSIONS, ' ', absl::SkipEmpty())) {
    const std::pair<std::string, std::string> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    versions[kv.first.c_str()] = kv.second;
  }
  info["versions"] = versions;
  info["bundled_libraries"] = BundledLibraries();
  info["gpu_jpeg_decode"] = PINWHEEL_PY_HAVE_NVJPEG != 0;
  info["nvjpeg_library"] = LoadedNvjpeg();
  return info;
}

void BindBuildInfo(nb::module_& m) {
  m.def("build_info", &BuildInfo,
        "How this pinwheel was built: {'version': pinwheel's version "
        "(loader/version.h), 'backend': 'cuda' or 'host', "
        "'cuda_version': the CUDA toolkit's version (None without the cuda "
        "backend), 'cuda_architectures': the GPU code built, e.g. ['sm_75', "
        "..., 'compute_120'] (None without the cuda backend), 'build_type', "
        "'compiler', 'versions': {'pinwheel', 'abseil', 'onetbb', "
        "'libjpeg_turbo', 'nanobind'}, 'bundled_libraries': the files the "
        "wheel bundles in pinwheel_loader.libs/ ([] for a build from "
        "source), 'gpu_jpeg_decode': whether decode='gpu' (nvJPEG) is built "
        "in, 'nvjpeg_library': the libnvjpeg this process loaded, or "
        "None}.");
}

}  // namespace pinwheel::python
