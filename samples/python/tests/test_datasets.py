"""Every shipped dataset, and a Python dataset, through the loader."""
import numpy as np
import pytest

import pinwheel
from conftest import host_loader


def test_array_dataset_yields_every_sample_once_with_its_own_fields(array_dataset, images):
    with host_loader(array_dataset, batch_size=16, shuffle=True, seed=3, num_workers=2) as loader:
        assert len(loader) == 7
        seen = []
        for batch in loader:
            assert batch["image"].dtype == np.uint8 and batch["image"].shape[1:] == (3, 8, 8)
            assert batch["label"].dtype == np.int64
            np.testing.assert_array_equal(batch["image"], images[batch["label"]])
            assert list(batch["label"]) == batch.indices
            seen.extend(batch.indices)
        assert sorted(seen) == list(range(100))
        assert seen != list(range(100))  # shuffled


def test_array_dataset_reads_the_arrays_in_place(labels):
    values = np.zeros((10, 2), dtype=np.float32)
    dataset = pinwheel.ArrayDataset({"v": values, "label": labels[:10]})
    values[:] = 7  # no copy was made: the loader sees the change
    with host_loader(dataset, batch_size=10) as loader:
        (batch,) = list(loader)
        assert (batch["v"] == 7).all()


def test_epochs_follow_one_another_with_a_new_order(array_dataset):
    with host_loader(array_dataset, batch_size=100, shuffle=True, seed=5, num_workers=1) as loader:
        first = [b.indices for b in loader]
        second = [b.indices for b in loader]
        assert loader.epoch == 2
        assert sorted(first[0]) == sorted(second[0]) == list(range(100))
        assert first != second
        assert loader.stats()["epochs_completed"] == 2


def test_record_file_round_trips_every_record(tmp_path, images, labels):
    path = tmp_path / "data.pwr"
    assert pinwheel.write_record_file(path, {"image": images, "label": labels}) == 100
    dataset = pinwheel.RecordFile(path)
    assert len(dataset) == 100
    assert dataset.fields == [("image", "u8", [3, 8, 8]), ("label", "i64", [])]
    with host_loader(dataset, batch_size=32, shuffle=True, seed=1, num_workers=2) as loader:
        count = 0
        for batch in loader:
            np.testing.assert_array_equal(batch["image"], images[batch["label"]])
            count += batch.size
        assert count == 100


def test_token_windows_give_targets_shifted_by_one_token(tmp_path):
    tokens = (np.arange(10_000) % 50_000).astype(np.uint16)
    path = tmp_path / "tokens.u16"
    tokens.tofile(path)
    dataset = pinwheel.TokenWindows(path, seq_len=64, seed=2)
    assert len(dataset) == 10_000 // 65
    with host_loader(dataset, batch_size=8, num_workers=2, drop_last=True) as loader:
        for batch in loader:
            inputs, targets = batch["input"], batch["target"]
            assert inputs.shape == (8, 64) and inputs.dtype == np.int64
            np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])
            np.testing.assert_array_equal(targets - inputs, 1)  # tokens[i] = i here


def test_token_windows_window_output_ships_the_files_u16_tokens(tmp_path):
    path = tmp_path / "tokens.u16"
    np.arange(10_000, dtype=np.uint16).tofile(path)
    dataset = pinwheel.TokenWindows(path, seq_len=64, seed=2, window=True)
    widened = pinwheel.TokenWindows(path, seq_len=64, seed=2)
    assert len(dataset) == len(widened)
    with host_loader(dataset, batch_size=8, num_workers=2, drop_last=True) as loader:
        for batch in loader:
            tokens = batch["tokens"]
            assert tokens.shape == (8, 65) and tokens.dtype == np.uint16
            np.testing.assert_array_equal(np.diff(tokens.astype(np.int64), axis=1), 1)


class Squares(pinwheel.Dataset):
    def __init__(self, size=50):
        super().__init__({"x": ("f32", (4,)), "y": (np.int64, ()), "h": ("bf16", (2,))}, size=size)
        self.seen_shapes = set()

    def read(self, index, sample):
        self.seen_shapes.add(tuple((k, v.dtype.name, v.shape) for k, v in sample.items()))
        sample["x"][:] = index
        sample["y"][...] = index * index
        sample["h"][:] = 0x3F80  # bf16 1.0, written as its bits


@pytest.mark.parametrize("workers", [0, 3])
def test_python_dataset_writes_into_numpy_views_of_the_slot(workers):
    dataset = Squares()
    with host_loader(dataset, batch_size=8, num_workers=workers) as loader:
        total = 0
        for batch in loader:
            idx = np.array(batch.indices)
            np.testing.assert_array_equal(batch["y"], idx * idx)
            np.testing.assert_array_equal(batch["x"], np.repeat(idx[:, None], 4, axis=1))
            assert batch["h"].dtype == np.uint16 and (batch["h"] == 0x3F80).all()
            total += batch.size
        assert total == 50
    assert dataset.seen_shapes == {(("x", "float32", (4,)), ("y", "int64", ()), ("h", "uint16", (2,)))}


class AssignsFields(pinwheel.Dataset):
    """Replaces the view instead of writing into it: a mistake that used to
    write nothing."""

    def __init__(self):
        super().__init__({"x": ("f32", (4,))}, size=8)

    def read(self, index, sample):
        sample["x"] = np.full(4, index, np.float32)


@pytest.mark.parametrize("workers", [0, 2])
def test_assigning_a_field_in_read_raises_type_error_naming_the_view(workers):
    with host_loader(AssignsFields(), batch_size=4, num_workers=workers) as loader:
        with pytest.raises(pinwheel.Error) as info:
            loader.next()
    cause = info.value.__cause__
    assert isinstance(cause, TypeError)
    assert 'sample["x"][...] = value' in str(cause)
    assert 'sample["x"][...] = value' in str(info.value)
    assert info.value.index == 0


def test_dlpack_output_yields_dlpack_objects(array_dataset):
    # DLPackTensor (__dlpack__ / __dlpack_device__), not bare capsules: see
    # test_dlpack.py.
    with host_loader(array_dataset, batch_size=50, output="dlpack") as loader:
        batch = next(iter(loader))
        assert type(batch["image"]).__name__ == "DLPackTensor"
        assert sorted(batch.keys()) == ["image", "label"]


def test_batch_is_a_read_only_mapping(array_dataset):
    with host_loader(array_dataset, batch_size=10) as loader:
        batch = loader.next()
        assert "image" in batch and "nope" not in batch
        assert len(batch) == 2
        assert set(batch) == {"image", "label"}
        assert set(batch.to_dict()) == {"image", "label"}
        assert batch.get("nope") is None
        with pytest.raises(KeyError, match="fields: image, label"):
            batch["nope"]
        assert batch.epoch == 0 and batch.index == 0 and batch.size == 10


def test_batch_registers_as_a_mapping(array_dataset):
    import collections.abc

    with host_loader(array_dataset, batch_size=10) as loader:
        assert isinstance(loader.next(), collections.abc.Mapping)


def test_a_python_dataset_is_freed_with_its_loader():
    import gc
    import weakref

    dataset = Squares()
    alive = weakref.ref(dataset)
    loader = host_loader(dataset, batch_size=8, num_workers=2)
    assert loader.next() is not None
    del dataset, loader
    gc.collect()
    assert alive() is None


def test_a_field_read_leaves_unwritten_is_zeros_not_the_last_samples():
    # Issue 35: the views of read() reused a buffer, so a field read() did
    # not write came out with the previous sample's values.
    class OddOnly(pinwheel.Dataset):
        def __init__(self):
            super().__init__({"x": ("i64", (3,)), "y": ("f32", ())}, size=40)

        def read(self, index, sample):
            sample["y"][...] = index
            if index % 2 == 1:
                sample["x"][:] = index  # even indices leave x unwritten

    for workers in (0, 2):
        with host_loader(OddOnly(), batch_size=5, num_workers=workers) as loader:
            seen = 0
            for batch in loader:
                for x, y in zip(np.array(batch["x"]), np.array(batch["y"])):
                    expected = int(y) if int(y) % 2 == 1 else 0
                    assert (x == expected).all(), (int(y), x)
                    seen += 1
    assert seen == 40
