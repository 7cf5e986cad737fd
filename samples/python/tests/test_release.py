"""The release rule (see the pinwheel package docstring): a released Batch
cannot be indexed; views taken from it keep its buffer from reuse while they
live; holding every buffer is an error, not a hang."""
import gc

import numpy as np
import pytest

import pinwheel
from conftest import host_loader


def test_indexing_a_released_batch_raises(array_dataset):
    with host_loader(array_dataset, batch_size=10) as loader:
        batch = loader.next()
        assert not batch.released
        batch.release()
        batch.release()  # idempotent
        assert batch.released
        with pytest.raises(pinwheel.FailedPreconditionError, match="released"):
            batch["image"]
        with pytest.raises(pinwheel.FailedPreconditionError):
            batch.to_dict()
        assert len(batch) == 0 and "image" not in batch


def test_a_view_outliving_its_batch_keeps_its_data(array_dataset, images):
    with host_loader(array_dataset, batch_size=10, num_workers=2, device_buffers=2,
                     prefetch=2) as loader:
        first = loader.next()
        kept = first["image"]
        indices = first.indices
        first.release()
        del first
        # Nine more batches cycle through the other device buffer; the kept
        # view's buffer is not reused while the view lives.
        for _ in range(9):
            batch = loader.next()
            np.testing.assert_array_equal(batch["image"], images[batch.indices])
            del batch
        np.testing.assert_array_equal(kept, images[indices])


def test_holding_every_device_buffer_raises_instead_of_hanging(array_dataset):
    with host_loader(array_dataset, batch_size=10, num_workers=1, device_buffers=2) as loader:
        held = [loader.next()["label"], loader.next()["label"]]
        gc.collect()
        with pytest.raises(pinwheel.FailedPreconditionError, match="device buffers"):
            loader.next()
        del held  # the views give the buffers back: the loader goes on
        gc.collect()
        assert loader.next() is not None


def test_batches_dropped_without_release_give_their_buffers_back(array_dataset):
    with host_loader(array_dataset, batch_size=5, num_workers=2, device_buffers=2) as loader:
        for _ in range(3):  # 60 batches through 2 buffers
            assert sum(b.size for b in loader) == 100


def test_iterating_with_one_device_buffer_releases_each_batch_before_the_next(
        array_dataset, images):
    # The C++ range's rule: the batch yielded last gives its buffer back when
    # the next is asked for, so one device buffer is enough for a for loop.
    with host_loader(array_dataset, batch_size=10, num_workers=2, device_buffers=1) as loader:
        for _ in range(2):  # two whole epochs of 10 batches
            seen = []
            for batch in loader:
                np.testing.assert_array_equal(batch["image"], images[batch.indices])
                seen.extend(batch.indices)
            assert seen == list(range(100))
        # A Batch the iterator had to release says so instead of showing
        # other data; views taken from a batch keep their data while held
        # (and then hold the only buffer: the next batch is an error, not
        # a hang or a crash).
        batches = []
        with pytest.raises(pinwheel.FailedPreconditionError, match="device buffers"):
            for batch in loader:
                batches.append(batch)
                if len(batches) == 3:
                    kept = batch["image"]
                    kept_indices = batch.indices
        assert batches[0].released and batches[1].released
        with pytest.raises(pinwheel.FailedPreconditionError, match="released"):
            batches[0]["image"]
        np.testing.assert_array_equal(kept, images[kept_indices])
