"""Status codes surface as pinwheel.errors classes that are also the
built-in exceptions Python code catches."""
import time

import numpy as np
import pytest

import pinwheel
from conftest import host_loader


def test_invalid_option_is_a_value_error_naming_option_and_rule(array_dataset):
    with pytest.raises(ValueError, match="batch_size.*0.*>= 1") as info:
        host_loader(array_dataset, batch_size=0)
    assert isinstance(info.value, pinwheel.InvalidArgumentError)
    assert isinstance(info.value, pinwheel.Error)
    assert info.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize("kwargs,match", [
    ({"device": "gpu:7"}, "gpu:7"),
    ({"on_error": "ignore"}, "on_error"),
    ({"output": "arrow"}, "output"),
    ({"timeout": 0.0, "num_workers": 1}, "timeout"),
])
def test_bad_arguments_are_invalid_argument(array_dataset, kwargs, match):
    with pytest.raises(pinwheel.InvalidArgumentError, match=match):
        host_loader(array_dataset, **kwargs)


def test_unsupported_dtype_is_invalid_argument():
    with pytest.raises(pinwheel.InvalidArgumentError, match="complex"):
        pinwheel.ArrayDataset({"z": np.zeros(4, np.complex64)})


def test_missing_record_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        pinwheel.RecordFile(tmp_path / "missing.pwr")
    assert isinstance(info.value, pinwheel.NotFoundError)


def test_corrupt_record_file_names_what_is_wrong(tmp_path):
    path = tmp_path / "bad.pwr"
    path.write_bytes(b"NOTAFILE" + bytes(100))
    with pytest.raises(pinwheel.Error, match="magic"):
        pinwheel.RecordFile(path)


class Failing(pinwheel.Dataset):
    def __init__(self, bad, error):
        super().__init__({"x": ("i64", ())}, size=40)
        self.bad, self.error = bad, error

    def read(self, index, sample):
        if index == self.bad:
            raise self.error
        sample["x"][...] = index


@pytest.mark.parametrize("workers", [0, 2])
def test_read_failure_surfaces_with_its_index_and_cause(workers):
    with host_loader(Failing(13, ValueError("sample 13 is corrupt")), batch_size=8,
                     num_workers=workers) as loader:
        with pytest.raises(ValueError) as info:
            for _ in loader:
                pass
    error = info.value
    assert isinstance(error, pinwheel.InvalidArgumentError)
    assert error.index == 13
    assert "index 13" in str(error) and "batch 1" in str(error)
    assert "ValueError: sample 13 is corrupt" in str(error)
    assert isinstance(error.__cause__, ValueError)
    assert str(error.__cause__) == "sample 13 is corrupt"


@pytest.mark.parametrize("raised,expected", [
    (KeyError("k"), pinwheel.NotFoundError),
    (IndexError("i"), pinwheel.OutOfRangeError),
    (MemoryError(), pinwheel.ResourceExhaustedError),
    (OSError("disk"), pinwheel.UnavailableError),
    (RuntimeError("other"), pinwheel.UnknownError),
])
def test_python_exception_types_map_to_status_codes(raised, expected):
    with host_loader(Failing(5, raised), batch_size=8) as loader:
        with pytest.raises(expected) as info:
            list(loader)
    assert info.value.index == 5
    assert type(info.value.__cause__) is type(raised)


def test_a_failed_loader_keeps_raising_the_same_error():
    with host_loader(Failing(0, ValueError("first")), batch_size=8, num_workers=1) as loader:
        with pytest.raises(ValueError, match="first"):
            loader.next()
        with pytest.raises(ValueError, match="first"):
            loader.next()


def test_skip_policy_leaves_the_sample_out_and_counts_it():
    with host_loader(Failing(13, ValueError("x")), batch_size=8, on_error="skip",
                     num_workers=2) as loader:
        seen = [i for batch in loader for i in batch["x"]]
        assert sorted(seen) == [i for i in range(40) if i != 13]
        # Counted when read: workers may already have read epoch 1's copy.
        assert loader.stats()["samples_skipped"] >= 1


class Slow(pinwheel.Dataset):
    def __init__(self):
        super().__init__({"x": ("i64", ())}, size=4)

    def read(self, index, sample):
        if index == 0:
            time.sleep(1.0)
        sample["x"][...] = index


def test_timeout_raises_timeout_error_and_the_loader_goes_on():
    with host_loader(Slow(), batch_size=4, num_workers=1, timeout=0.2) as loader:
        with pytest.raises(TimeoutError) as info:
            loader.next()
        assert isinstance(info.value, pinwheel.DeadlineExceededError)
        assert "timeout" in str(info.value)
        while True:  # the slow batch arrives after all
            try:
                batch = loader.next()
                break
            except TimeoutError:
                continue
        assert sorted(batch["x"]) == [0, 1, 2, 3]


def test_next_after_close_is_cancelled(array_dataset):
    loader = host_loader(array_dataset, batch_size=10, num_workers=1)
    loader.close()
    loader.close()  # idempotent
    assert loader.closed
    with pytest.raises(pinwheel.CancelledError):
        loader.next()


def test_dataset_argument_must_be_a_pinwheel_dataset():
    with pytest.raises(pinwheel.InvalidArgumentError, match="list"):
        pinwheel.Loader([1, 2, 3])


class Gated(pinwheel.Dataset):
    def __init__(self, gate):
        super().__init__({"x": ("i64", ())}, size=8)
        self.gate = gate

    def read(self, index, sample):
        self.gate.wait()
        sample["x"][...] = index


def test_close_or_next_while_another_thread_is_in_next_raises():
    import threading

    gate = threading.Event()
    loader = host_loader(Gated(gate), batch_size=8, num_workers=1)
    got = []
    consumer = threading.Thread(target=lambda: got.append(loader.next()))
    consumer.start()
    try:
        while not loader._core._busy:
            time.sleep(0.01)  # until the other thread waits inside next()
        with pytest.raises(pinwheel.FailedPreconditionError, match="close"):
            loader.close()
        with pytest.raises(pinwheel.FailedPreconditionError, match="one consumer"):
            loader.next()
    finally:
        gate.set()
        consumer.join()
    assert sorted(got[0]["x"]) == list(range(8))
    loader.close()


@pytest.mark.parametrize("kwargs,error,message", [
    ({"batch_size": 2.5}, TypeError, "batch_size must be an int >= 1, got 2.5 (float)"),
    ({"seed": -1}, ValueError, "seed = -1: must be an int in 0..2**64-1"),
    ({"num_workers": "2"}, TypeError, "num_workers must be an int in 0..256, got '2' (str)"),
    ({"prefetch": None}, TypeError, "prefetch must be an int in 1..1024, got None"),
    ({"device_buffers": 2**40}, ValueError, "device_buffers = 1099511627776: must be an int in 1..64"),
    ({"rank": 1.0}, TypeError, "rank must be an int >= 0"),
    ({"world_size": True}, TypeError, "world_size must be an int >= 1, got True (bool)"),
    ({"shuffle": "yes"}, TypeError, "shuffle must be a bool, got 'yes' (str)"),
    ({"drop_last": 1}, TypeError, "drop_last must be a bool, got 1 (int)"),
    ({"drop_uneven_tail": None}, TypeError, "drop_uneven_tail must be a bool"),
    ({"in_order": 0}, TypeError, "in_order must be a bool"),
    ({"pin_memory": "no"}, TypeError, "pin_memory must be a bool"),
    ({"timeout": "5"}, TypeError, "timeout must be None or a number of seconds > 0, got '5' (str)"),
    ({"device": 0}, TypeError, "device must be a str"),
])
def test_wrong_type_arguments_name_the_argument_and_what_it_must_be(array_dataset, kwargs,
                                                                    error, message):
    with pytest.raises(error) as info:
        host_loader(array_dataset, **kwargs)
    assert message in str(info.value)
    assert "Invoked with" not in str(info.value)  # not nanobind's signature dump
    if error is ValueError:
        assert isinstance(info.value, pinwheel.InvalidArgumentError)


def test_numpy_scalars_are_accepted_as_numbers_and_bools(array_dataset):
    with host_loader(array_dataset, batch_size=np.int64(10), seed=np.uint64(3),
                     shuffle=np.bool_(True), num_workers=np.int32(1),
                     timeout=np.float32(30)) as loader:
        assert sum(b.size for b in loader) == 100
