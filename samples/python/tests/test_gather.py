"""Loader(gather=...): the gather path from Python (C++ LoaderOptions::gather)
on the host backend, where the copy thread gathers the rows with memcpy:
the same batches as the worker path, the reason when it cannot be used,
and the argument's checks."""
import numpy as np
import pytest

import pinwheel
from conftest import host_loader


def epoch_of(dataset, epochs=2, **kwargs):
    """Every batch of `epochs` epochs as (epoch, index, indices, {name: copy}),
    and the loader's stats."""
    kwargs.setdefault("batch_size", 8)
    kwargs.setdefault("shuffle", True)
    kwargs.setdefault("seed", 11)
    kwargs.setdefault("num_workers", 2)
    with host_loader(dataset, **kwargs) as loader:
        batches = []
        for _ in range(epochs):
            for batch in loader:
                batches.append((batch.epoch, batch.index, batch.indices,
                                {name: np.array(view) for name, view in batch.items()}))
        return batches, loader.stats()


def assert_same_batches(a, b):
    assert len(a) == len(b) and a
    for (*identity_a, fields_a), (*identity_b, fields_b) in zip(a, b):
        assert identity_a == identity_b  # epoch, index, sample indices
        assert fields_a.keys() == fields_b.keys()
        for name in fields_a:
            assert fields_a[name].dtype == fields_b[name].dtype
            np.testing.assert_array_equal(fields_a[name], fields_b[name])


def test_array_dataset_batches_on_the_gather_path_are_the_worker_paths(array_dataset):
    gathered, stats = epoch_of(array_dataset, gather="on")
    assert stats["gather"] is True and stats["gather_fallback"] == ""
    read, stats = epoch_of(array_dataset, gather="off")
    assert stats["gather"] is False
    assert_same_batches(gathered, read)


@pytest.mark.parametrize("window", [False, True])
def test_token_windows_on_the_gather_path_are_the_worker_paths(tmp_path, window):
    tokens = (np.arange(20_000) * 7919 % 50_000).astype(np.uint16)
    path = tmp_path / "tokens.u16"
    tokens.tofile(path)
    dataset = pinwheel.TokenWindows(path, seq_len=31, seed=4, window=window)
    gathered, stats = epoch_of(dataset, batch_size=16, gather="auto")
    assert stats["gather"] is True, stats["gather_fallback"]
    assert stats["gather_order_on_device"] is True
    assert stats["gather_registered_bytes"] >= tokens.nbytes
    read, _ = epoch_of(dataset, batch_size=16)
    assert_same_batches(gathered, read)


def test_record_file_on_the_gather_path_is_the_worker_paths(tmp_path, images, labels):
    path = tmp_path / "data.pwr"
    pinwheel.write_record_file(path, {"image": images, "label": labels})
    dataset = pinwheel.RecordFile(path)
    gathered, stats = epoch_of(dataset, gather="on", drop_last=True)
    assert stats["gather"] is True
    read, _ = epoch_of(dataset, drop_last=True)
    assert_same_batches(gathered, read)


def test_the_gather_path_is_off_by_default_as_in_cpp(array_dataset):
    _, stats = epoch_of(array_dataset, epochs=1)
    assert stats["gather"] is False
    assert stats["gather_fallback"] == "gather = GatherMode::kOff"
    assert stats["gather_registered_bytes"] == 0
    assert stats["gather_order_on_device"] is False


class Squares(pinwheel.Dataset):
    def __init__(self):
        super().__init__({"x": ("i64", ())}, size=20)

    def read(self, index, sample):
        sample["x"][...] = index * index


def test_auto_falls_back_saying_why_and_on_raises_it():
    batches, stats = epoch_of(Squares(), epochs=1, gather="auto")
    assert stats["gather"] is False
    assert "Gather" in stats["gather_fallback"], stats["gather_fallback"]
    assert sorted(int(x) for _, _, _, fields in batches for x in fields["x"]) == \
        sorted(i * i for i in range(20))
    with pytest.raises(pinwheel.FailedPreconditionError, match="gather"):
        host_loader(Squares(), batch_size=4, gather="on")


def test_a_bad_gather_argument_names_it(array_dataset):
    with pytest.raises(pinwheel.InvalidArgumentError, match="gather = 'sometimes'"):
        host_loader(array_dataset, gather="sometimes")
    with pytest.raises(TypeError, match="gather"):
        host_loader(array_dataset, gather=True)


def test_the_gather_path_reads_small_arrays_as_they_were_when_the_loader_was_built():
    # Arrays under 32 MiB are gathered from a copy on pages of the loader's
    # own (Note [small arrays are copied onto pages of their own]); the
    # worker path reads them in place.
    values = np.zeros((8, 2), dtype=np.float32)
    dataset = pinwheel.ArrayDataset({"v": values})
    with host_loader(dataset, batch_size=8, gather="on") as gathered, \
            host_loader(dataset, batch_size=8, gather="off") as read:
        values[:] = 5
        assert (next(iter(gathered))["v"] == 0).all()
        assert (next(iter(read))["v"] == 5).all()


def test_arrays_the_caller_dropped_stay_alive_for_the_gather():
    rng = np.random.default_rng(3)
    expected = rng.integers(0, 1000, size=(4_400_000,), dtype=np.int64)  # 35 MB: in place
    dataset = pinwheel.ArrayDataset({"x": expected.copy()})
    with host_loader(dataset, batch_size=100_000, gather="on", num_workers=1) as loader:
        del dataset
        import gc

        gc.collect()
        for batch in loader:
            np.testing.assert_array_equal(batch["x"], expected[batch.indices])


def test_a_loader_built_after_the_arrays_changed_gathers_their_new_bytes():
    """Issue 35 item 4: the copy of small arrays is taken when each loader is
    built; a second loader built after the arrays changed, while the first is
    alive, gathers the new values, and the first keeps the ones it was built
    over (before the fix both served the first copy)."""
    labels = np.arange(16, dtype=np.int64)
    data = pinwheel.ArrayDataset({"y": labels})
    with host_loader(data, batch_size=16, gather="on") as first:
        labels += 1000
        with host_loader(data, batch_size=16, gather="on") as second:
            assert second.stats()["gather"] is True
            assert [np.array(b["y"]).tolist() for b in second] == [list(range(1000, 1016))]
        assert [np.array(b["y"]).tolist() for b in first] == [list(range(16))]
