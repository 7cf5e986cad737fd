"""stats() reports the CPUs the process may use (affinity mask, cgroup quota)
and, when num_workers exceeds them, the one line said when the loader was
made (loader/cpu_budget.h)."""
import os

import numpy as np
import pytest

import pinwheel
from conftest import host_loader


@pytest.fixture
def one_cpu():
    """Narrows this thread to one CPU of its mask; restores it afterwards."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity on this platform")
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})
    yield min(saved)
    os.sched_setaffinity(0, saved)


def _loader(num_workers):
    data = pinwheel.ArrayDataset({"i": np.arange(40, dtype=np.int64)})
    return host_loader(data, batch_size=8, num_workers=num_workers)


def test_stats_report_the_cpu_budget():
    with _loader(1) as loader:
        stats = loader.stats()
    if hasattr(os, "sched_getaffinity"):
        assert stats["cpus"] <= len(os.sched_getaffinity(0))
    assert stats["cpus"] >= 1
    assert stats["cpu_limited_by"] in ("affinity mask", "cgroup quota", "machine")
    assert stats["cpu_quota"] >= 0
    assert stats["cpu_shared_by"] >= 1
    assert stats["cpu_budget"].startswith(f"{stats['cpus']} CPU")
    assert stats["num_workers"] == 1
    assert stats["cpu_warning"] == ""


def test_more_workers_than_cpus_are_said_once_and_kept_in_stats(one_cpu, capfd):
    with _loader(3) as loader:
        said = capfd.readouterr().err
        stats = loader.stats()
        assert sum(len(b.indices) for b in loader) == 40  # honoured: all read
    assert stats["cpus"] == 1
    assert stats["cpu_affinity"] == str(one_cpu)
    assert stats["num_workers"] == 3
    assert "num_workers = 3 cannot run in parallel" in stats["cpu_warning"]
    assert said == stats["cpu_warning"] + "\n"


def test_open_mpis_default_binding_moves_the_readers_unless_kept(one_cpu, monkeypatch):
    """Under Open MPI's variables and a one-CPU mask the reader threads run on
    the rank's share (loader/worker_cpus.h); keep_launcher_binding keeps them."""
    for name, value in (("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1"),
                        ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
                        ("OMPI_COMM_WORLD_LOCAL_SIZE", "1")):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("OMPI_MCA_hwloc_base_binding_policy", raising=False)
    data = pinwheel.ArrayDataset({"i": np.arange(40, dtype=np.int64)})
    with host_loader(data, batch_size=8, num_workers=2,
                     keep_launcher_binding=True) as kept:
        assert kept.stats()["cpu_worker_cpus"] == ""
        assert kept.stats()["cpus"] == 1
    with host_loader(data, batch_size=8, num_workers=2) as widened:
        stats = widened.stats()
        assert sum(len(b.indices) for b in widened) == 40
    if os.cpu_count() == 1:
        assert stats["cpu_worker_cpus"] == ""  # nothing to widen onto
    else:
        assert stats["cpu_worker_cpus"] != ""
        assert stats["cpu_limited_by"] == "rank's share"
        assert "pinwheel: Open MPI bound rank 0 of 1" in stats["cpu_warning"]
    assert os.sched_getaffinity(0) == {one_cpu}  # the caller keeps its CPU


def test_keep_launcher_binding_must_be_a_bool():
    data = pinwheel.ArrayDataset({"i": np.arange(8, dtype=np.int64)})
    with pytest.raises(TypeError, match="keep_launcher_binding"):
        host_loader(data, batch_size=8, keep_launcher_binding="yes")
