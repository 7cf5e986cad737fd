"""PINWHEEL_REQUIRE_TORCH=1 (set by .ci/run on the README's test line): a
torch that does not import fails the torch tests instead of skipping them,
at module level (test_torch.py) and inside a test (test_images.py's torch
case); without the variable they skip, saying why. A package named torch
whose import raises ImportError stands in for a failed install."""
import os
import pathlib
import subprocess
import sys

import pytest

TESTS = pathlib.Path(__file__).resolve().parent


def run_pytest(tmp_path, targets, require):
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True, exist_ok=True)
    (fake / "torch" / "__init__.py").write_text('raise ImportError("no torch here (a test)")\n')
    path = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake), *path]))
    env.pop("PINWHEEL_REQUIRE_TORCH", None)
    if require:
        env["PINWHEEL_REQUIRE_TORCH"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           *[str(TESTS / t) for t in targets]],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


@pytest.mark.parametrize("target", ["test_torch.py",
                                    "test_images.py::test_torch_output_is_bf16_chw_tensors"])
def test_without_torch_the_torch_tests_skip_saying_so(tmp_path, target):
    result = run_pytest(tmp_path, [target], require=False)
    # test_torch.py skips as a module: pytest then collected no test (5)
    assert result.returncode in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), \
        result.stdout + result.stderr
    assert "torch is not installed" in result.stdout and " skipped" in result.stdout, result.stdout
    assert f"{target.split('::')[0]}:" in result.stdout, result.stdout  # the line that skipped


@pytest.mark.parametrize("target", ["test_torch.py",
                                    "test_images.py::test_torch_output_is_bf16_chw_tensors"])
def test_with_pinwheel_require_torch_they_fail_instead(tmp_path, target):
    result = run_pytest(tmp_path, [target], require=True)
    assert result.returncode != 0, result.stdout + result.stderr
    assert "PINWHEEL_REQUIRE_TORCH=1 but torch does not import (no torch here (a test))" \
        in result.stdout, result.stdout
    assert " skipped" not in result.stdout, result.stdout
