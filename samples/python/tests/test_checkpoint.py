"""Loader.state_dict() / load_state_dict() / resume=: exact resume mid-epoch,
elastic resume over another world size, and the refusals (the package's own
exception classes, naming the field)."""
import pickle

import numpy as np
import pytest

import pinwheel
from conftest import host_loader

SIZE = 98


@pytest.fixture
def counting():
    return pinwheel.ArrayDataset({"i": np.arange(SIZE, dtype=np.int64)})


def rest_of_epoch(loader):
    """The batches (as lists of dataset indices) until the epoch ends."""
    out = []
    for batch in loader:
        np.testing.assert_array_equal(batch["i"], batch.indices)
        out.append(list(batch.indices))
    return out


@pytest.mark.parametrize("workers", [0, 3])
def test_resume_mid_epoch_delivers_the_rest_as_the_uninterrupted_loader(counting, workers):
    kwargs = dict(batch_size=8, shuffle=True, seed=11)
    with host_loader(counting, num_workers=2, **kwargs) as whole:
        expected = rest_of_epoch(whole) + rest_of_epoch(whole)  # epochs 0 and 1
    with host_loader(counting, num_workers=2, **kwargs) as first:
        seen = [list(first.next().indices) for _ in range(5)]
        state = pickle.loads(pickle.dumps(first.state_dict()))  # as torch.save would
    assert seen == expected[:5]
    assert state["version"] == 1 and state["epoch"] == 0 and state["position"] == 40
    assert len(state["pinwheel_checkpoint"]) < 100
    # Another num_workers / prefetch: the same batches, bit for bit.
    with host_loader(counting, num_workers=workers, prefetch=2, resume=state, **kwargs) as resumed:
        assert resumed.epoch == 0
        rest = rest_of_epoch(resumed) + rest_of_epoch(resumed)
    assert rest == expected[5:]
    flat = [i for batch in seen + rest[:len(expected) // 2 - 5] for i in batch]
    assert sorted(flat) == list(range(SIZE))  # epoch 0: every sample exactly once


def test_load_state_dict_rebuilds_the_loader_at_the_checkpoint(counting):
    with host_loader(counting, batch_size=10, shuffle=True, seed=2, num_workers=2) as loader:
        loader.next()
        loader.next()
        state = loader.state_dict()
        after = [list(loader.next().indices) for _ in range(3)]
        loader.load_state_dict(state)  # back to after batch 2
        assert [list(loader.next().indices) for _ in range(3)] == after


def test_state_dict_after_an_epoch_resumes_at_the_next_epoch(counting):
    with host_loader(counting, batch_size=16, shuffle=True, seed=5) as loader:
        rest_of_epoch(loader)
        state = loader.state_dict()
        expected = rest_of_epoch(loader)
    with host_loader(counting, batch_size=16, shuffle=True, seed=5, resume=state) as resumed:
        assert rest_of_epoch(resumed) == expected


@pytest.mark.parametrize("from_world,to_world", [(2, 1), (1, 2), (2, 3)])
def test_elastic_resume_delivers_every_remaining_sample_exactly_once(counting, from_world,
                                                                     to_world):
    # Every rank of `from_world` reads 2 batches (one per step) and
    # checkpoints; the checkpoints agree but for the rank, and rank 0's
    # resumes the job on `to_world` ranks (98 - 16 * from_world samples
    # left: 66 or 82, which the new world sizes divide).
    delivered, states = [], []
    for rank in range(from_world):
        with host_loader(counting, batch_size=8, shuffle=True, seed=17, rank=rank,
                         world_size=from_world) as loader:
            for _ in range(2):
                delivered += list(loader.next().indices)
            states.append(loader.state_dict())
    assert {(s["epoch"], s["position"]) for s in states} == {(0, 16 * from_world)}
    assert [s["rank"] for s in states] == list(range(from_world))
    rest = []
    for rank in range(to_world):
        with host_loader(counting, batch_size=8, shuffle=True, seed=17, rank=rank,
                         world_size=to_world, resume=states[0]) as loader:
            rest += [i for batch in rest_of_epoch(loader) for i in batch]
    assert (SIZE - len(delivered)) % to_world == 0  # no padding in these cases
    assert sorted(delivered + rest) == list(range(SIZE))  # every sample exactly once


def test_another_seed_is_refused_naming_the_field(counting):
    with host_loader(counting, batch_size=8, shuffle=True, seed=1) as loader:
        loader.next()
        state = loader.state_dict()
    with pytest.raises(pinwheel.CheckpointMismatchError, match="'seed' = 1 .*seed 2") as e:
        host_loader(counting, batch_size=8, shuffle=True, seed=2, resume=state)
    assert e.value.field == "seed"
    assert isinstance(e.value, pinwheel.InvalidArgumentError)  # and a ValueError


def test_another_dataset_size_is_refused_naming_the_field(counting):
    with host_loader(counting, batch_size=8) as loader:
        loader.next()
        state = loader.state_dict()
    smaller = pinwheel.ArrayDataset({"i": np.arange(50, dtype=np.int64)})
    with pytest.raises(pinwheel.CheckpointMismatchError, match="dataset_size' = 98") as e:
        host_loader(smaller, batch_size=8, resume=state)
    assert e.value.field == "dataset_size"


def test_shuffle_on_and_off_is_refused_naming_the_field(counting):
    with host_loader(counting, batch_size=8, shuffle=True) as loader:
        state = loader.state_dict()
    with pytest.raises(pinwheel.CheckpointMismatchError) as e:
        host_loader(counting, batch_size=8, shuffle=False, resume=state)
    assert e.value.field == "shuffle"


def test_a_refused_load_state_dict_leaves_the_loader_running(counting):
    with host_loader(counting, batch_size=8, seed=1, shuffle=True) as loader:
        foreign = host_loader(counting, batch_size=8, seed=9, shuffle=True)
        state = foreign.state_dict()
        foreign.close()
        first = list(loader.next().indices)
        with pytest.raises(pinwheel.CheckpointMismatchError, match="seed"):
            loader.load_state_dict(state)
        assert loader.next() is not None and first


def test_corrupt_bytes_are_refused_naming_the_field(counting):
    with host_loader(counting, batch_size=8) as loader:
        state = loader.state_dict()
    damaged = bytearray(state["pinwheel_checkpoint"])
    damaged[30] ^= 0xFF
    with pytest.raises(pinwheel.CorruptCheckpointError, match="checksum|CRC") as e:
        host_loader(counting, batch_size=8, resume={**state, "pinwheel_checkpoint": bytes(damaged)})
    assert isinstance(e.value, pinwheel.DataLossError)
    truncated = state["pinwheel_checkpoint"][:20]
    with pytest.raises(pinwheel.CorruptCheckpointError, match="truncated") as e:
        host_loader(counting, batch_size=8, resume=truncated)
    assert e.value.field is not None


def test_not_a_checkpoint_is_refused_naming_the_key(counting):
    with pytest.raises(pinwheel.InvalidCheckpointError, match="pinwheel_checkpoint") as e:
        host_loader(counting, batch_size=8, resume={"model": 1})
    assert e.value.field == "pinwheel_checkpoint"
    with pytest.raises(pinwheel.InvalidCheckpointError, match="magic|PWLDCKPT"):
        host_loader(counting, batch_size=8, resume=b"x" * 80)
    with host_loader(counting, batch_size=8) as loader:
        state = loader.state_dict()
    with pytest.raises(pinwheel.InvalidCheckpointError, match="'version' = 2") as e:
        host_loader(counting, batch_size=8, resume={**state, "version": 2})
    assert e.value.field == "version"
    with pytest.raises(pinwheel.InvalidCheckpointError, match="is a list"):
        host_loader(counting, batch_size=8, resume=[1, 2])


def test_out_of_order_loader_cannot_checkpoint(counting):
    with host_loader(counting, batch_size=8, num_workers=2, in_order=False) as loader:
        loader.next()
        with pytest.raises(pinwheel.FailedPreconditionError, match="in_order"):
            loader.state_dict()


def test_an_iteration_running_across_load_state_dict_is_cancelled_not_silent(counting):
    with host_loader(counting, batch_size=8) as loader:
        state = loader.state_dict()
        batches = iter(loader)
        next(batches)
        loader.load_state_dict(state)
        with pytest.raises(pinwheel.CancelledError, match="closed"):
            next(batches)
        assert len(rest_of_epoch(loader)) == len(loader)  # the new loader: from the start
