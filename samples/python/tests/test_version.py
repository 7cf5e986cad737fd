"""Issue 35: pinwheel has a version, written once (loader/version.h) and
reported the same everywhere: pinwheel.__version__, build_info(), the
Python package's metadata (pyproject.toml) and the CMake package version
(the top-level CMakeLists.txt reads the header). And the documented
corners: the gather path's refusal of pad_last_batch."""
import pathlib
import re

import pinwheel

SOURCE = pathlib.Path(__file__).resolve().parents[3]


def header_version():
    text = (SOURCE / "loader" / "version.h").read_text()
    parts = [int(re.search(rf"#define PINWHEEL_VERSION_{p} (\d+)", text).group(1))
             for p in ("MAJOR", "MINOR", "PATCH")]
    string = re.search(r'#define PINWHEEL_VERSION_STRING "([^"]+)"', text).group(1)
    assert string == ".".join(map(str, parts))
    return string


def test_version_is_the_headers_everywhere():
    version = header_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinwheel.__version__)
    assert pinwheel.__version__ == version
    assert pinwheel.build_info()["version"] == version
    pyproject = (SOURCE / "samples" / "python" / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == version
    cmake = (SOURCE / "CMakeLists.txt").read_text()
    assert re.search(r"project\(pinwheel VERSION \$\{_pinwheel_version\}", cmake)


def test_the_changelog_names_this_version_and_the_moved_headers():
    changelog = (SOURCE / "CHANGELOG.md").read_text()
    assert f"## {header_version()}" in changelog
    for moved in ("crc32c.h", "host_memory_limits.h", "numa_placement.h", "sampler.h",
                  "HostMemoryPlan", "AdmitHostMemory", "pinning/base/status_macros.h"):
        assert moved in changelog, moved


def test_the_loader_docs_say_gather_on_refuses_pad_last_batch():
    doc = " ".join(pinwheel.Loader.__doc__.split())
    assert "cannot be used with ``pad_last_batch``" in doc
