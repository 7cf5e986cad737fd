"""Issue 22 from Python: fixed-shape batches. pad_last_batch (a validity
mask field instead of a short batch) and on_error="replace" (a failed
sample replaced by a deterministic other, counted in stats)."""
import numpy as np
import pytest

import pinwheel
from conftest import host_loader


def numbers(n):
    return pinwheel.ArrayDataset({"x": np.arange(n, dtype=np.int64) * 10})


def test_the_last_batch_is_padded_with_a_validity_mask():
    with host_loader(numbers(10), batch_size=4, pad_last_batch=True, num_workers=2) as loader:
        assert [f[0] for f in loader.fields] == ["x", "valid"]
        assert loader.fields[1][1:] == ("u8", [4])
        batches = [(b.indices, b.size, b.padded, list(b["x"]), list(b["valid"]))
                   for b in loader]
        stats = loader.stats()
    assert [size for _, size, _, _, _ in batches] == [4, 4, 4]
    assert batches[0][2:] == (0, [0, 10, 20, 30], [1, 1, 1, 1])
    assert batches[2] == ([8, 9, -1, -1], 4, 2, [80, 90, 0, 0], [1, 1, 0, 0])
    assert stats["samples_delivered"] == 10 and stats["samples_padded"] == 2


def test_without_pad_last_batch_the_last_batch_is_short():
    with host_loader(numbers(10), batch_size=4) as loader:
        last = [(b.size, b.padded, "valid" in b) for b in loader][-1]
        assert last == (2, 0, False)
        assert loader.stats()["samples_padded"] == 0


class FailingEveryFifth(pinwheel.Dataset):
    def __init__(self, n):
        super().__init__({"x": ("i64", ())}, size=n)

    def read(self, index, sample):
        if index % 5 == 0:
            raise OSError(f"corrupt record {index}")
        sample["x"][...] = index * 10


def test_skipped_samples_are_padded_too():
    with host_loader(FailingEveryFifth(8), batch_size=4, on_error="skip",
                     pad_last_batch=True, valid_field="real") as loader:
        batches = [(b.indices, list(b["real"])) for b in loader]
    assert batches == [([1, 2, 3, -1], [1, 1, 1, 0]), ([4, 6, 7, -1], [1, 1, 1, 0])]


def test_the_mask_name_is_checked():
    with pytest.raises(pinwheel.InvalidArgumentError, match="valid_field"):
        host_loader(numbers(4), pad_last_batch=True, valid_field="x")
    with pytest.raises(TypeError, match="valid_field must be a str"):
        host_loader(numbers(4), pad_last_batch=True, valid_field=1)
    with pytest.raises(TypeError, match="pad_last_batch must be a bool"):
        host_loader(numbers(4), pad_last_batch="yes")


def test_replace_keeps_every_batch_full_and_counts_the_replacements():
    orders = []
    for workers in (0, 3):
        with host_loader(FailingEveryFifth(40), batch_size=8, on_error="replace", seed=2,
                         num_workers=workers) as loader:
            sizes, indices, values = [], [], []
            for b in loader:
                sizes.append(b.size)
                indices += b.indices
                values += [int(v) for v in b["x"]]
            stats = loader.stats()
        assert sizes == [8] * 5
        assert all(i % 5 != 0 for i in indices) and values == [i * 10 for i in indices]
        assert stats["samples_replaced"] >= 8  # the 8 failed ones, and failed replacements
        assert "corrupt record" in stats["last_replaced"]
        assert stats["samples_skipped"] == 0
        orders.append(indices)
    assert orders[0] == orders[1]  # the replacements are a pure function


def test_replace_is_refused_for_an_iterable_dataset_and_unknown_policies_named():
    class Stream(pinwheel.IterableDataset):
        def __init__(self):
            super().__init__({"x": ("i64", ())})

        def open_shard(self, shard, num_shards, epoch):
            return None

    with pytest.raises(pinwheel.InvalidArgumentError, match="on_error"):
        host_loader(Stream(), on_error="replace")
    with pytest.raises(pinwheel.InvalidArgumentError, match="'stop', 'skip' or 'replace'"):
        host_loader(numbers(4), on_error="retry")
