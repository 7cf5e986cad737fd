"""Shared fixtures. The suite runs on the host backend (device="cpu") with
numpy output, so it needs neither a GPU nor torch; test_torch.py adds the
GPU cases when torch and a GPU are there."""
import numpy as np
import pytest

import pinwheel


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
