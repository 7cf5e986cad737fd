"""The numpy views a Python Dataset.read() gets (issue 18 item 10): a view
kept past the call used to alias the pinned slot, showing later samples,
and reading it after close() crashed the interpreter. Now each read() gets
views of a buffer of its own, copied into the batch when it returns."""
import numpy as np
import pytest

import pinwheel
from conftest import host_loader


class Keeper(pinwheel.Dataset):
    """Sample i: x = [i, i, i, i]. Keeps every view read() gets, and a view
    derived from it, with the index it was written for."""

    def __init__(self, size=64):
        super().__init__({"x": ("i64", (4,)), "y": ("f32", (2,))}, size=size)
        self.kept = []

    def read(self, index, sample):
        sample["x"][:] = index
        sample["y"][:] = index / 2
        self.kept.append((index, sample["x"], sample["y"][1:]))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_view_kept_from_read_keeps_its_own_sample_even_after_close(num_workers):
    dataset = Keeper()
    with host_loader(dataset, batch_size=8, num_workers=num_workers) as loader:
        for batch in loader:
            x = np.asarray(batch["x"])
            for row, index in zip(x, batch.indices):
                assert (row == index).all()  # the batch got the written values
        # Before the fix every kept view aliased a slot, now holding the
        # last samples written into it.
        assert len(dataset.kept) >= 64
        for index, x, y in dataset.kept:
            assert (x == index).all(), (index, x)
            assert (y == index / 2).all(), (index, y)
    # The loader is closed and its ring freed: the views are still valid.
    for index, x, y in dataset.kept:
        assert (x == index).all() and (y == index / 2).all()


def test_writing_into_a_kept_view_changes_no_batch():
    dataset = Keeper(size=16)
    with host_loader(dataset, batch_size=16, num_workers=0) as loader:
        loader.next()
        _, x, _ = dataset.kept[0]
        x[:] = -1  # later reads must not see it
        loader.start_epoch(1)
        batch = loader.next()
        x = np.asarray(batch["x"])
        for row, index in zip(x, batch.indices):
            assert (row == index).all()


class Addresses(pinwheel.Dataset):
    """Records where each read()'s view points, keeping no view."""

    def __init__(self):
        super().__init__({"x": ("u8", (100,))}, size=32)
        self.addresses = []

    def read(self, index, sample):
        sample["x"][:] = index
        self.addresses.append(sample["x"].__array_interface__["data"][0])


def test_a_buffer_no_view_holds_is_reused():
    dataset = Addresses()
    with host_loader(dataset, batch_size=8, num_workers=0) as loader:
        for _ in loader:
            pass
    # One read at a time on the consumer's thread: one buffer, reused.
    assert len(set(dataset.addresses)) == 1
