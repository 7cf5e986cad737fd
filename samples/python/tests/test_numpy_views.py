"""The numpy views of a batch (output="numpy") and of read()'s sample, made
with numpy's C API (Note [numpy views without numpy.asarray] in
ext/py_datasets.cc): every dtype as numpy names it, the batch's bytes,
C-contiguous, and kept alive by the batch."""
import gc

import numpy as np
import pytest

import pinwheel
from conftest import host_loader

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
          np.uint64, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_a_batch_view_has_the_arrays_dtype_shape_and_bytes(dtype):
    values = (np.arange(12 * 3) % 7).astype(dtype).reshape(12, 3)
    with host_loader(pinwheel.ArrayDataset({"v": values}), batch_size=4, shuffle=True,
                     seed=2) as loader:
        for batch in loader:
            view = batch["v"]
            assert view.dtype == np.dtype(dtype) and view.shape == (4, 3)
            assert view.flags.c_contiguous
            np.testing.assert_array_equal(view, values[batch.indices])


def test_bf16_is_shown_as_its_bits_in_uint16():
    class Halves(pinwheel.Dataset):
        def __init__(self):
            super().__init__({"h": ("bf16", (2,))}, size=4)

        def read(self, index, sample):
            assert sample["h"].dtype == np.uint16 and sample["h"].shape == (2,)
            sample["h"][:] = 0x3F80 + index

    with host_loader(Halves(), batch_size=4) as loader:
        (batch,) = list(loader)
        assert batch["h"].dtype == np.uint16
        assert batch["h"][:, 0].tolist() == [0x3F80, 0x3F81, 0x3F82, 0x3F83]


def test_a_view_kept_past_the_batch_keeps_its_bytes():
    values = np.arange(64, dtype=np.int64).reshape(64, 1)
    with host_loader(pinwheel.ArrayDataset({"v": values}), batch_size=8,
                     device_buffers=12) as loader:  # more than the 8 kept
        kept = []
        for batch in loader:
            kept.append((batch.indices, batch["v"]))
        del batch
        gc.collect()
        for indices, view in kept:
            assert view.base is not None
            np.testing.assert_array_equal(view[:, 0], indices)
