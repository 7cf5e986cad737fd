"""pinwheel.build_info() (issue 18 item 15): the backend and CUDA version
this package was built with, at run time."""
import pinwheel


def test_build_info_names_the_backend_and_its_cuda_version():
    info = pinwheel.build_info()
    assert info["backend"] in ("cuda", "host")
    assert (info["backend"] == "cuda") == pinwheel.cuda_backend_built()
    if info["backend"] == "cuda":
        major = info["cuda_version"].split(".")[0]
        assert major.isdigit() and int(major) >= 11
        assert info["cuda_architectures"]
    else:
        assert info["cuda_version"] is None
        assert info["cuda_architectures"] is None
    assert isinstance(info["compiler"], str) and info["compiler"]


def test_build_info_is_exported():
    assert "build_info" in pinwheel.__all__


def test_build_info_lists_versions_bundled_libraries_and_nvjpeg():
    info = pinwheel.build_info()
    for name in ("pinwheel", "abseil", "onetbb", "libjpeg_turbo", "nanobind"):
        assert info["versions"][name], (name, info["versions"])
    # A build from source links the system's libraries; the repaired wheel
    # lists its pinwheel_loader.libs/ (.ci/wheel_smoke.py checks that one).
    assert isinstance(info["bundled_libraries"], list)
    assert isinstance(info["gpu_jpeg_decode"], bool)
    if info["gpu_jpeg_decode"]:
        assert "libnvjpeg.so" in info["nvjpeg_library"]
    else:
        assert info["nvjpeg_library"] is None
    if info["backend"] == "cuda":
        assert all(a.startswith(("sm_", "compute_")) for a in info["cuda_architectures"]), \
            info["cuda_architectures"]
