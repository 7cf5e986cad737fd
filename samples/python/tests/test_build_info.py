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
