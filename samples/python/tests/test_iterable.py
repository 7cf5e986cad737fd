"""pinwheel.IterableDataset (Python shards, bound to the C++ IterableDataset /
SampleStream) with save_state / restore_state checkpoints, and worker_init."""
import threading

import numpy as np
import pytest

import pinwheel
from conftest import host_loader

SIZE = 90


class CounterStream:
    def __init__(self, values, stateful=True):
        self.values, self.at = values, 0
        if not stateful:
            self.save_state = self.restore_state = None
            del self.save_state, self.restore_state

    def next(self, sample):
        if self.at == len(self.values):
            return False
        sample["i"][...] = self.values[self.at]
        sample["sq"][:] = self.values[self.at] ** 2
        self.at += 1
        return True

    def save_state(self):
        return self.at.to_bytes(8, "little")

    def restore_state(self, state):
        self.at = int.from_bytes(state, "little")


class PlainStream:
    """No save_state / restore_state."""

    def __init__(self, values):
        self.inner = CounterStream(values)

    def next(self, sample):
        return self.inner.next(sample)


class Counter(pinwheel.IterableDataset):
    def __init__(self, size=SIZE, stream=CounterStream):
        super().__init__({"i": ("i64", ()), "sq": ("i64", (2,))})
        self.size, self.stream = size, stream
        self.opened = []

    def open_shard(self, shard, num_shards, epoch):
        self.opened.append((shard, num_shards, epoch))
        return self.stream(range(shard, self.size, num_shards))


def samples_of(batches):
    return [int(i) for batch in batches for i in batch["i"]]


@pytest.mark.parametrize("workers", [0, 1, 3])
def test_an_epoch_reads_every_sample_of_every_shard_once(workers):
    data = Counter()
    with host_loader(data, batch_size=8, num_workers=workers) as loader:
        seen = []
        for batch in loader:
            np.testing.assert_array_equal(batch["sq"][:, 0], batch["i"] ** 2)
            seen += [int(i) for i in batch["i"]]
        assert sorted(seen) == list(range(SIZE))
        assert sorted(samples_of(loader)) == list(range(SIZE))  # epoch 1
    shards = max(1, workers)
    # Epochs 0 and 1 opened each shard (epoch 2 may have been started ahead).
    assert {(s, shards, e) for e in (0, 1) for s in range(shards)} <= set(data.opened)
    assert {n for _, n, _ in data.opened} == {shards}


def test_iterable_dataset_and_its_loader_have_fields_but_no_len():
    data = Counter()
    assert [f[0] for f in data.fields] == ["i", "sq"]
    with pytest.raises(TypeError, match="no len"):
        len(data)
    with host_loader(data, batch_size=8) as loader:
        with pytest.raises(TypeError, match="unknown"):
            len(loader)
        assert "pinwheel.Loader" in repr(loader)


@pytest.mark.parametrize("workers", [1, 2])
def test_checkpoint_resumes_each_shard_after_its_last_delivered_sample(workers):
    with host_loader(Counter(), batch_size=4, num_workers=workers, prefetch=3) as loader:
        seen = samples_of(loader.next() for _ in range(5))
        state = loader.state_dict()
    with host_loader(Counter(), batch_size=4, num_workers=workers, resume=state) as resumed:
        rest = samples_of(resumed)  # the rest of epoch 0
        assert sorted(samples_of(resumed)) == list(range(SIZE))  # epoch 1 whole
    assert sorted(seen + rest) == list(range(SIZE))  # every sample exactly once


@pytest.mark.parametrize("workers", [2, 3])
def test_a_resumed_epoch_delivers_the_uninterrupted_batches_in_order(workers):
    with host_loader(Counter(), batch_size=4, num_workers=workers) as loader:
        whole = samples_of(loader)
    for cut in (1, 5, 11):
        with host_loader(Counter(), batch_size=4, num_workers=workers, prefetch=3) as loader:
            seen = samples_of(loader.next() for _ in range(cut))
            state = loader.state_dict()
        with host_loader(Counter(), batch_size=4, num_workers=workers,
                         resume=state) as resumed:
            assert seen + samples_of(resumed) == whole, f"cut after {cut} batches"


def test_streams_without_save_state_cannot_checkpoint():
    with host_loader(Counter(stream=PlainStream), batch_size=4, num_workers=1) as loader:
        loader.next()
        with pytest.raises(pinwheel.FailedPreconditionError, match="save_state"):
            loader.state_dict()


def test_iterable_checkpoint_refuses_another_shard_count():
    with host_loader(Counter(), batch_size=4, num_workers=2) as loader:
        loader.next()
        state = loader.state_dict()
    with pytest.raises(pinwheel.CheckpointMismatchError) as e:
        host_loader(Counter(), batch_size=4, num_workers=3, resume=state)
    assert e.value.field == "num_shards"


def test_a_bad_stream_or_return_value_is_an_error_naming_it():
    class NoStream(Counter):
        def open_shard(self, shard, num_shards, epoch):
            return None

    with host_loader(NoStream(), batch_size=4, num_workers=1) as loader:
        with pytest.raises(pinwheel.Error, match=r"open_shard\(0, 1, 0\) returned None"):
            loader.next()

    class Chatty(CounterStream):
        def next(self, sample):
            super().next(sample)
            return "yes"

    with host_loader(Counter(stream=Chatty), batch_size=4, num_workers=1) as loader:
        with pytest.raises(pinwheel.InvalidArgumentError, match="returned 'yes'.*True"):
            loader.next()


def test_an_exception_in_next_raises_its_class_naming_the_shard():
    class Failing(CounterStream):
        def next(self, sample):
            if self.at == 3:
                raise ValueError("bad record at 3")
            return super().next(sample)

    with host_loader(Counter(stream=Failing), batch_size=2, num_workers=1) as loader:
        loader.next()
        with pytest.raises(pinwheel.InvalidArgumentError, match="shard 0.*ValueError: bad record"):
            loader.next()


def test_worker_init_runs_on_each_worker_before_it_reads():
    calls, lock = [], threading.Lock()
    local = threading.local()

    def init(worker):
        with lock:
            calls.append(worker)
        local.worker = worker

    class Checked(pinwheel.Dataset):
        def __init__(self):
            super().__init__({"w": ("i64", ())}, size=64)

        def read(self, index, sample):
            sample["w"][...] = local.worker  # AttributeError unless initialised

    with host_loader(Checked(), batch_size=4, num_workers=3, worker_init=init) as loader:
        workers = {int(w) for batch in loader for w in batch["w"]}
    assert workers <= {0, 1, 2} and set(calls) <= {0, 1, 2} and calls
    assert workers <= set(calls)


def test_worker_init_for_an_iterable_dataset_and_its_failure():
    calls = []
    with host_loader(Counter(), batch_size=8, num_workers=2, worker_init=calls.append) as loader:
        assert sorted(samples_of(loader)) == list(range(SIZE))
    assert set(calls) <= {0, 1} and calls

    def broken(worker):
        raise KeyError(f"no GPU for worker {worker}")

    with host_loader(Counter(), batch_size=8, num_workers=2, worker_init=broken) as loader:
        with pytest.raises(pinwheel.NotFoundError, match="worker_init.*KeyError"):
            loader.next()
    with pytest.raises(TypeError, match="worker_init must be callable"):
        host_loader(Counter(), batch_size=8, worker_init=3)


def test_a_worker_init_error_keeps_the_worker_and_the_original_exception():
    # Issue 35, item 9: the error lost the worker index and the exception
    # worker_init raised.
    class Plain(pinwheel.Dataset):
        def __init__(self):
            super().__init__({"x": ("i64", ())}, size=16)

        def read(self, index, sample):
            sample["x"][...] = index

    def broken(worker):
        raise KeyError(f"no GPU for worker {worker}")

    for dataset in (Plain(), Counter()):
        with host_loader(dataset, batch_size=8, num_workers=2, worker_init=broken) as loader:
            with pytest.raises(pinwheel.Error) as caught:
                loader.next()
        error = caught.value
        assert error.worker in (0, 1)
        assert f"worker {error.worker}" in str(error)
        assert isinstance(error.__cause__, KeyError)
        assert error.__cause__.args == (f"no GPU for worker {error.worker}",)
