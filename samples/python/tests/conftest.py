"""Shared fixtures. The suite runs on the host backend (device="cpu") with
numpy output, so it needs neither a GPU nor torch; test_torch.py adds the
GPU cases when torch and a GPU are there."""
import os

import numpy as np
import pytest

import pinwheel

# CI sets PINWHEEL_REQUIRE_TORCH=1 (.ci/run, on the README's test line, whose
# `install-deps.sh --tests` installs torch): there a torch that does not
# import fails the tests that need it instead of skipping them, so that a
# failed install cannot pass as a green run with the torch tests skipped.
REQUIRE_TORCH = os.environ.get("PINWHEEL_REQUIRE_TORCH") == "1"


def import_torch(reason):
    """Returns the torch module. Without one that imports, the calling test
    (or module, at module level) skips saying `reason`, or fails saying why
    under PINWHEEL_REQUIRE_TORCH=1."""
    __tracebackhide__ = True  # the skip names the caller's line, as importorskip's does
    try:
        import torch
        return torch
    except ImportError as e:
        error = str(e)
    if REQUIRE_TORCH:
        pytest.fail(f"PINWHEEL_REQUIRE_TORCH=1 but torch does not import ({error}); "
                    f"without it: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


@pytest.fixture
def images():
    rng = np.random.default_rng(1)
    return rng.integers(0, 256, size=(100, 3, 8, 8), dtype=np.uint8)


@pytest.fixture
def labels():
    return np.arange(100, dtype=np.int64)


@pytest.fixture
def array_dataset(images, labels):
    return pinwheel.ArrayDataset({"image": images, "label": labels})


def host_loader(dataset, **kwargs):
    """A loader on the host backend yielding numpy arrays."""
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("output", "numpy")
    return pinwheel.Loader(dataset, **kwargs)
