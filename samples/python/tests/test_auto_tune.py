"""num_workers="auto" and prefetch="auto": the loader sizes its reader
threads and pinned buffers while it runs (loader/README.md, "Auto-tuning"),
reports what it did in stats()["auto_tune"], and delivers the batches of a
fixed configuration. Staged on the host backend with reads that sleep (a
sleep releases the GIL), so that counts, never speeds, are asserted."""
import time

import numpy as np
import pytest

import pinwheel
from conftest import host_loader


class SleepyReads(pinwheel.Dataset):
    def __init__(self, size, seconds):
        super().__init__({"i": (np.int64, ())}, size=size)
        self.seconds = seconds

    def read(self, index, sample):
        time.sleep(self.seconds)
        sample["i"][...] = index


def _indices(loader, batches, step_s=0.0):
    """The samples of the next `batches` batches, across epochs."""
    out = []
    taken = 0
    it = iter(loader)
    while taken < batches:
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        out.extend(int(i) for i in np.asarray(batch["i"]))
        taken += 1
        if step_s:
            time.sleep(step_s)
    return out


def test_auto_grows_the_workers_and_reports_each_change():
    data = SleepyReads(2000, 0.001)
    # Reads that sleep need no CPU: 4 threads may read on a 2-CPU host.
    with host_loader(data, batch_size=4, num_workers="auto", prefetch="auto",
                     auto_max_workers=4) as loader:
        before = loader.stats()["auto_tune"]
        assert before["workers_auto"] and before["prefetch_auto"]
        assert before["workers"] == 1 and before["prefetch"] == 2
        assert before["max_workers"] == loader.stats()["num_workers"] == 4
        _indices(loader, 200)
        stats = loader.stats()
    tune = stats["auto_tune"]
    assert 1 < tune["workers"] <= 4, tune["last_reason"]
    assert tune["changes"] >= 1, tune
    assert "at batch" in tune["last_reason"]
    assert 1 <= tune["prefetch"] <= tune["max_prefetch"] <= 64
    assert stats["pinned_bytes"] <= stats["pinned_bytes_peak"]
    assert tune["off_reason"] == ""


def test_auto_delivers_the_order_of_one_worker():
    data = SleepyReads(300, 0.0002)
    with host_loader(data, batch_size=4, shuffle=True, seed=3, num_workers=1) as fixed:
        expected = _indices(fixed, 150)
    with host_loader(data, batch_size=4, shuffle=True, seed=3, num_workers="auto",
                     prefetch="auto") as tuned:
        got = _indices(tuned, 150)
    assert got == expected
    assert sorted(got[:300]) == list(range(300))


def test_without_auto_the_stats_show_the_fixed_values():
    data = pinwheel.ArrayDataset({"i": np.arange(40, dtype=np.int64)})
    with host_loader(data, batch_size=4, num_workers=2, prefetch=3) as loader:
        tune = loader.stats()["auto_tune"]
    assert not tune["workers_auto"] and not tune["prefetch_auto"]
    assert (tune["workers"], tune["prefetch"], tune["changes"]) == (2, 3, 0)


def test_by_default_auto_stays_within_the_cpus():
    data = pinwheel.ArrayDataset({"i": np.arange(40, dtype=np.int64)})
    with host_loader(data, batch_size=4, num_workers="auto") as loader:
        stats = loader.stats()
    assert stats["auto_tune"]["max_workers"] == max(1, stats["cpus"] - 1)
    assert stats["cpu_warning"] == ""


@pytest.mark.parametrize("name", ["num_workers", "prefetch"])
def test_another_string_is_refused_naming_the_argument(name):
    data = pinwheel.ArrayDataset({"i": np.arange(40, dtype=np.int64)})
    for wrong in ("fast", "Auto", 2.5):
        with pytest.raises(TypeError,
                           match=f"Loader: {name} must be an int in .*, got {wrong!r} .*, or \"auto\""):
            host_loader(data, batch_size=4, **{name: wrong})
