"""Issue 22 from Python: custom samplers (WeightedRandomSampler,
ClassBalancedSampler, a pinwheel.Sampler subclass), MixtureDataset (weights,
modes, schedules, samples_per_source), and their exact, elastic resume."""
import collections

import numpy as np
import pytest

import pinwheel
from conftest import host_loader


def source(size, k):
    """Source k: field "x" holds k * 1000 + its own index."""
    return pinwheel.ArrayDataset({"x": np.arange(size, dtype=np.int64) + 1000 * k})


def drain(loader):
    """The indices and "x" values of the rest of the current epoch."""
    indices, values = [], []
    for batch in loader:
        indices += batch.indices
        values += list(batch["x"])
    return indices, values


# Samplers.

def test_weighted_random_sampler_draws_by_weight_and_never_a_zero_weight():
    data = source(3, 0)
    sampler = pinwheel.WeightedRandomSampler([1.0, 0.0, 3.0], num_samples=4000)
    assert len(sampler) == 4000 and sampler.dataset_size == 3
    with host_loader(data, batch_size=64, sampler=sampler, seed=5) as loader:
        indices, _ = drain(loader)
    counts = collections.Counter(indices)
    assert len(indices) == 4000 and counts[1] == 0
    # Binomial(4000, 0.25): sd ~27; allow 5 sd.
    assert abs(counts[0] - 1000) < 140, counts
    assert indices[:10] == [sampler.at(5, 0, p) for p in range(10)]


def test_a_sampler_order_is_the_same_with_any_number_of_workers_and_seeded():
    data = source(50, 0)
    sampler = pinwheel.WeightedRandomSampler(np.linspace(0.1, 1, 50), num_samples=200)
    orders = []
    for workers, seed in ((0, 1), (3, 1), (2, 2)):
        with host_loader(data, batch_size=16, sampler=sampler, seed=seed,
                         num_workers=workers) as loader:
            orders.append(drain(loader)[0])
    assert orders[0] == orders[1]
    assert orders[0] != orders[2]


def test_class_balanced_sampler_reads_each_class_equally_often():
    labels = np.array([0] * 90 + [1] * 10)
    data = pinwheel.ArrayDataset({"x": np.arange(100, dtype=np.int64), "label": labels})
    sampler = pinwheel.ClassBalancedSampler(labels, num_samples=4000)
    with host_loader(data, batch_size=100, sampler=sampler, seed=3) as loader:
        drawn = [int(labels[i]) for i in drain(loader)[0]]
    assert abs(drawn.count(1) - 2000) < 160  # Binomial(4000, 1/2): sd ~32


def test_sampler_arguments_are_checked_naming_them():
    with pytest.raises(pinwheel.InvalidArgumentError, match=r"weights\[1\]"):
        pinwheel.WeightedRandomSampler([1.0, -1.0])
    with pytest.raises(pinwheel.InvalidArgumentError, match="weights is empty"):
        pinwheel.WeightedRandomSampler([])
    with pytest.raises(TypeError, match="weights"):
        pinwheel.WeightedRandomSampler(["a", "b"])
    with pytest.raises(pinwheel.InvalidArgumentError, match="weights has shape"):
        pinwheel.WeightedRandomSampler([[1.0], [2.0]])
    with pytest.raises(pinwheel.InvalidArgumentError, match="num_samples = -2"):
        pinwheel.WeightedRandomSampler([1.0], num_samples=-2)
    with pytest.raises(TypeError, match="num_samples"):
        pinwheel.WeightedRandomSampler([1.0], num_samples=2.5)
    with pytest.raises(TypeError, match="labels must be integers"):
        pinwheel.ClassBalancedSampler([0.5, 1.5])
    with pytest.raises(pinwheel.InvalidArgumentError, match="label"):
        pinwheel.ClassBalancedSampler([0, -1])
    data = source(4, 0)
    sampler = pinwheel.WeightedRandomSampler([1.0] * 4)
    with pytest.raises(TypeError, match="sampler must be a pinwheel sampler"):
        host_loader(data, sampler=[0, 1, 2, 3])
    with pytest.raises(pinwheel.InvalidArgumentError, match="sampler with shuffle"):
        host_loader(data, sampler=sampler, shuffle=True)
    with pytest.raises(pinwheel.InvalidArgumentError, match="sampler"):
        host_loader(source(5, 0), sampler=sampler)  # made for 4 samples
    with pytest.raises(pinwheel.OutOfRangeError, match="position 4"):
        sampler.at(0, 0, 4)


class Reversed(pinwheel.Sampler):
    """Epoch e reads the dataset backwards, rotated by seed + e."""

    def __init__(self, n):
        super().__init__(n, dataset_size=n)
        self.n = n

    def at(self, seed, epoch, position):
        return (self.n - 1 - position + seed + epoch) % self.n


def test_a_python_sampler_orders_the_loader_with_any_number_of_workers():
    data = source(10, 0)
    for workers in (0, 2):
        with host_loader(data, batch_size=4, sampler=Reversed(10), seed=1,
                         num_workers=workers) as loader:
            assert drain(loader)[0] == [(10 - p) % 10 for p in range(10)]
            assert drain(loader)[0] == [(11 - p) % 10 for p in range(10)]


class Broken(pinwheel.Sampler):
    def __init__(self, result):
        super().__init__(8)
        self.result = result

    def at(self, seed, epoch, position):
        if position != 5:
            return position
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.mark.parametrize("result, error, text", [
    # The loader reports what the sampler threw as INTERNAL, with its message.
    (ValueError("no index"), pinwheel.InternalError, "ValueError: no index"),
    ("three", pinwheel.InternalError,
     r"TypeError: Broken.at\(0, 0, 5\) returned 'three': it must return an int"),
    (99, pinwheel.InvalidArgumentError, "returned index 99"),
])
def test_a_python_sampler_failure_names_the_position(result, error, text):
    with host_loader(source(8, 0), batch_size=4, sampler=Broken(result)) as loader:
        assert loader.next().indices == [0, 1, 2, 3]  # the batch before is fine
        with pytest.raises(error, match=text) as info:
            loader.next()
    assert "global position 5 of epoch 0 (batch 1)" in str(info.value)


class Counting(pinwheel.Sampler):
    """Reads backwards; counts the calls into Python."""

    def __init__(self, n):
        super().__init__(n)
        self.n, self.calls = n, 0

    def at(self, seed, epoch, position):
        return self.n - 1 - position

    def at_many(self, seed, epoch, positions):
        self.calls += 1
        return [self.n - 1 - p for p in positions]


def test_a_python_sampler_is_asked_in_blocks_for_each_ranks_positions():
    data = source(1000, 0)
    sampler = Counting(1000)
    with host_loader(data, batch_size=100, sampler=sampler) as loader:
        assert drain(loader)[0] == list(range(999, -1, -1))
    assert sampler.calls <= 5  # blocks of 256, not one call a sample
    for rank in range(3):  # rank r of 3 reads positions r, r + 3, ...
        sampler.calls = 0
        with host_loader(data, batch_size=50, sampler=sampler, rank=rank,
                         world_size=3) as loader:
            got = drain(loader)[0]
        positions = [(rank + 3 * t) % 1000 for t in range(334)]  # wrapped padding
        assert got == [999 - p for p in positions]
        assert sampler.calls <= 4


def test_a_python_sampler_needs_its_at_and_valid_sizes():
    with pytest.raises(pinwheel.InvalidArgumentError, match="size = -1"):
        pinwheel.Sampler(-1)
    with pytest.raises(NotImplementedError):
        pinwheel.Sampler(3).at(0, 0, 0)


def test_resume_with_a_python_sampler_is_exact():
    data = source(12, 0)
    with host_loader(data, batch_size=3, sampler=Reversed(12), seed=4) as loader:
        whole = drain(loader)[0]
    with host_loader(data, batch_size=3, sampler=Reversed(12), seed=4) as loader:
        first = loader.next().indices
        state = loader.state_dict()
    info = pinwheel._pinwheel._checkpoint_info(state["pinwheel_checkpoint"])
    assert info["custom_order"] is True
    with host_loader(data, batch_size=3, sampler=Reversed(12), seed=4, resume=state) as loader:
        assert first + drain(loader)[0] == whole
    with pytest.raises(pinwheel.CheckpointMismatchError) as info:
        host_loader(data, batch_size=3, seed=4, resume=state)  # the built-in order
    assert info.value.field == "sampler"


# Mixtures.

def test_a_stratified_mixture_holds_each_sources_share_in_every_window():
    sources = [source(7, 0), source(11, 1), source(13, 2)]
    mix = pinwheel.MixtureDataset(sources, [0.5, 0.3, 0.2], samples_per_epoch=60, window=10)
    assert len(mix) == 31 and mix.offsets == [0, 7, 18, 31]
    assert mix.quotas() == [5, 3, 2] and len(mix.order) == 60
    with host_loader(mix, batch_size=8, seed=7, num_workers=2) as loader:
        indices, values = drain(loader)
        assert loader.stats()["samples_per_source"] == [30, 18, 12]
    assert len(indices) == 60
    assert indices == [mix.order.at(7, 0, p) for p in range(60)]
    for i, v in zip(indices, values):
        k = mix.source_of(i)
        assert v == 1000 * k + i - mix.offsets[k]
    for w in range(6):
        window = [mix.source_of(i) for i in indices[10 * w:10 * w + 10]]
        assert [window.count(k) for k in range(3)] == [5, 3, 2]
    # Each source is read through before it restarts: source 0 (7 samples)
    # gives 30 samples, so every one of its samples 4 or 5 times.
    counts = collections.Counter(i for i in indices if mix.source_of(i) == 0)
    assert sorted(set(counts.values())) == [4, 5] and len(counts) == 7


def test_a_random_mixture_keeps_the_shares_in_another_order():
    sources = [source(20, 0), source(20, 1)]
    stratified = pinwheel.MixtureDataset(sources, [0.75, 0.25], window=8)
    randomized = pinwheel.MixtureDataset(sources, [0.75, 0.25], window=8, interleave="random")
    pattern = []
    for mix in (stratified, randomized):
        with host_loader(mix, batch_size=8, seed=1) as loader:
            indices = drain(loader)[0]
        per_window = [[mix.source_of(i) for i in indices[w:w + 8]] for w in range(0, 40, 8)]
        assert all(window.count(0) == 6 for window in per_window)
        pattern.append(per_window)
    assert all(w == pattern[0][0] for w in pattern[0])  # the same every window
    assert any(w != pattern[1][0] for w in pattern[1])  # not so in random mode


def test_with_replacement_draws_uniformly_from_each_source():
    mix = pinwheel.MixtureDataset([source(4, 0), source(4, 1)], [1.0, 1.0],
                                  samples_per_epoch=4000, window=2, draw="with_replacement")
    with host_loader(mix, batch_size=200, seed=2) as loader:
        indices = drain(loader)[0]
    counts = collections.Counter(i for i in indices if mix.source_of(i) == 0)
    assert len(counts) == 4 and all(abs(c - 500) < 110 for c in counts.values()), counts


def test_weight_schedules_by_epoch_and_by_sample():
    sources = [source(10, 0), source(10, 1)]
    by_epoch = pinwheel.MixtureDataset(sources, [0.5, 0.5], window=10, schedule=[
        {"first_epoch": 1, "weights": [0.9, 0.1]}])
    assert by_epoch.quotas(0) == [5, 5] and by_epoch.quotas(1) == [9, 1]
    with host_loader(by_epoch, batch_size=20, seed=1) as loader:
        drain(loader)
        assert loader.stats()["samples_per_source"] == [10, 10]
        drain(loader)
        assert loader.stats()["samples_per_source"] == [28, 12]
    by_sample = pinwheel.MixtureDataset(sources, [0.5, 0.5], window=10, schedule=[
        {"first_sample": 10, "weights": [0.2, 0.8]}])
    assert by_sample.quotas(0, 0) == [5, 5] and by_sample.quotas(0, 10) == [2, 8]
    with host_loader(by_sample, batch_size=10, seed=1) as loader:
        indices = drain(loader)[0]
    second = [by_sample.source_of(i) for i in indices[10:]]
    assert second.count(1) == 8


def test_mixture_arguments_are_checked_naming_them():
    a, b = source(4, 0), source(4, 1)
    cases = [
        (dict(sources=[], weights=[]), pinwheel.InvalidArgumentError, "sources is empty"),
        (dict(sources=a, weights=[1]), TypeError, "sources must be a list"),
        (dict(sources=[a, 3], weights=[1, 1]), TypeError, r"sources\[1\]"),
        (dict(sources=[a, b], weights=[1]), pinwheel.InvalidArgumentError, "one weight per"),
        (dict(sources=[a, b], weights=[1, -1]), pinwheel.InvalidArgumentError,
         r"weights\[1\] = -1"),
        (dict(sources=[a, b], weights=[0, 0]), pinwheel.InvalidArgumentError, "weight"),
        (dict(sources=[a, b], weights=[1, "x"]), TypeError, r"weights\[1\]"),
        (dict(sources=[a, b], weights=[1, 1], window=0), pinwheel.InvalidArgumentError,
         "window = 0"),
        (dict(sources=[a, b], weights=[1, 1], samples_per_epoch=0),
         pinwheel.InvalidArgumentError, "samples_per_epoch = 0"),
        (dict(sources=[a, b], weights=[1, 1], interleave="zip"),
         pinwheel.InvalidArgumentError, "interleave = 'zip'"),
        (dict(sources=[a, b], weights=[1, 1], draw="any"), pinwheel.InvalidArgumentError,
         "draw = 'any'"),
        (dict(sources=[a, b], weights=[1, 1], shuffle_sources="no"), TypeError,
         "shuffle_sources"),
        (dict(sources=[a, b], weights=[1, 1], schedule=[{"weights": [1, 0]}]),
         pinwheel.InvalidArgumentError, r"schedule\[0\] needs exactly one"),
        (dict(sources=[a, b], weights=[1, 1], schedule=[{"first_epoch": 1, "w": 1}]),
         pinwheel.InvalidArgumentError, r"schedule\[0\] has unknown keys"),
        (dict(sources=[a, b], weights=[1, 1], schedule=[{"first_epoch": 0, "weights": [1, 1]}]),
         pinwheel.InvalidArgumentError, r"schedule\[0\]\['first_epoch'\] = 0"),
        (dict(sources=[a, b], weights=[1, 1], schedule=[{"first_epoch": 1, "weights": [1]}]),
         pinwheel.InvalidArgumentError, r"schedule\[0\]\['weights'\] has 1 values"),
        (dict(sources=[a, b], weights=[1, 1], window=4,
              schedule=[{"first_sample": 3, "weights": [1, 1]}]),
         pinwheel.InvalidArgumentError, "window"),
        (dict(sources=[a, pinwheel.ArrayDataset({"y": np.arange(3)})], weights=[1, 1]),
         pinwheel.InvalidArgumentError, "source 1"),
    ]
    for kwargs, error, text in cases:
        with pytest.raises(error, match=text):
            pinwheel.MixtureDataset(**kwargs)
    mix = pinwheel.MixtureDataset([a, b], [1, 1])
    with pytest.raises(pinwheel.InvalidArgumentError, match="shuffle = True with a Mixture"):
        host_loader(mix, shuffle=True)
    with pytest.raises(pinwheel.OutOfRangeError, match="index 8"):
        mix.source_of(8)


def test_an_iterable_source_is_refused():
    class Stream(pinwheel.IterableDataset):
        def __init__(self):
            super().__init__({"x": ("i64", ())})

        def open_shard(self, shard, num_shards, epoch):
            return None

    with pytest.raises(pinwheel.InvalidArgumentError, match=r"sources\[1\] is an iterable"):
        pinwheel.MixtureDataset([source(3, 0), Stream()], [1, 1])
    with pytest.raises(pinwheel.InvalidArgumentError, match="sampler"):
        host_loader(Stream(), sampler=pinwheel.WeightedRandomSampler([1.0]))


def test_a_mixture_of_python_datasets_keeps_them_alive():
    class Numbers(pinwheel.Dataset):
        def __init__(self, k):
            super().__init__({"x": ("i64", ())}, size=5)
            self.k = k

        def read(self, index, sample):
            sample["x"][...] = 1000 * self.k + index

    mix = pinwheel.MixtureDataset([Numbers(0), Numbers(1)], [1, 1], window=2)
    import gc

    gc.collect()
    with host_loader(mix, batch_size=5, num_workers=2) as loader:
        indices, values = drain(loader)
    assert values == [1000 * mix.source_of(i) + i - mix.offsets[mix.source_of(i)]
                      for i in indices]


def test_mixture_resume_at_every_batch_across_one_two_three_ranks_matches():
    """One rank reads k batches and checkpoints, two ranks resume and read m
    batches each, three ranks resume that to the end of the epoch and
    through the next: rank r of W resumed at global position g reads, as its
    t-th sample, position g + t * W + r of the uninterrupted stream (past
    the end: wrapped padding), and every position is read."""
    mix = pinwheel.MixtureDataset(
        [source(7, 0), source(11, 1), source(13, 2)], [0.5, 0.3, 0.2],
        schedule=[{"first_sample": 30, "weights": [0.2, 0.6, 0.2]},
                  {"first_epoch": 1, "weights": [0.1, 0.1, 0.8]}],
        samples_per_epoch=60, window=10, interleave="random")
    size = 60

    def loader(rank, world, resume=None):
        return host_loader(mix, batch_size=2, seed=11, rank=rank, world_size=world,
                           num_workers=2, prefetch=3, resume=resume)

    with loader(0, 1) as whole:
        stream0, values0 = drain(whole)
        stream1 = drain(whole)[0]
    assert len(stream0) == size

    def expect_read(got, start, world, rank, covered):
        for t, index in enumerate(got):
            p = start + t * world + rank
            assert index == stream0[p % size], (start, world, rank, t)
            if p < size:
                covered[p] += 1

    for k in range(0, 25, 3):
        for m in (0, 1, 3):
            covered = [0] * size
            with loader(0, 1) as one:
                got = []
                for _ in range(k):
                    got += one.next().indices
                expect_read(got, 0, 1, 0, covered)
                first = one.state_dict()
            assert first["position"] == 2 * k
            second = None
            for rank in range(2):
                with loader(rank, 2, first) as two:
                    got = []
                    for _ in range(m):
                        got += two.next().indices
                    expect_read(got, first["position"], 2, rank, covered)
                    state = two.state_dict()
                if second is None:
                    second = state
                assert state["position"] == second["position"] == 2 * k + 4 * m
            for rank in range(3):
                with loader(rank, 3, second) as three:
                    indices, values = drain(three)
                    expect_read(indices, second["position"], 3, rank, covered)
                    assert values == [values0[stream0.index(i)] for i in indices]
                    assert drain(three)[0] == stream1[rank::3]
            assert min(covered) >= 1, (k, m)
