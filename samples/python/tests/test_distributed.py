"""pinwheel.distributed: every rank's wait for data summarised in a
RankWait record, the slowest rank named with its bound stage; on staged
records without torch, and over a gloo process group of 2 CPU processes
whose rank 1 reads slowly (the torch case skips without torch, and fails
under PINWHEEL_REQUIRE_TORCH=1, as CI runs it)."""
import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pinwheel
import pinwheel.distributed as pd
from conftest import host_loader, import_torch


def _drained(read_s, steps=24):
    class Slow(pinwheel.Dataset):
        def __init__(self):
            super().__init__({"x": ("i64", ())}, size=4 * steps)

        def read(self, index, sample):
            if read_s:
                import time
                time.sleep(read_s)
            sample["x"][...] = index

    loader = host_loader(Slow(), batch_size=4, num_workers=1)
    for _ in loader:
        pass
    return loader


def test_a_loader_whose_reads_are_slow_is_the_slowest_rank_bound_by_reads():
    slow, fast = _drained(0.004), _drained(0.0)
    try:
        records = [pd.rank_wait(fast, 0), pd.rank_wait(slow, 1)]
    finally:
        slow.close()
        fast.close()
    assert all(len(r) == 96 for r in records)
    got = pd.slowest_rank_of(records)
    assert got.rank == 1 and got.loader_bound, got
    assert got.line.startswith("slowest rank 1 of 2: Next() waits for data p50 "), got.line
    assert "bound by reads" in got.line, got.line


def test_records_that_are_not_rank_waits_are_refused_naming_them():
    with _drained(0.0) as loader:
        record = pd.rank_wait(loader, 0)
    with pytest.raises(pinwheel.InvalidArgumentError, match="record 1: .*95 bytes"):
        pd.slowest_rank_of([record, record[:-1]])
    with pytest.raises(pinwheel.InvalidArgumentError, match="rank 0, seen before"):
        pd.slowest_rank_of([record, record])
    with pytest.raises(pinwheel.InvalidArgumentError, match="no ranks"):
        pd.slowest_rank_of([])


RANK = textwrap.dedent("""
    import json, sys, time
    import numpy as np, torch.distributed as dist
    import pinwheel, pinwheel.distributed
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    class Data(pinwheel.Dataset):
        def __init__(self):
            super().__init__({"x": ("i64", ())}, size=96)
        def read(self, index, sample):
            if rank == 1:
                time.sleep(0.004)
            sample["x"][...] = index
    loader = pinwheel.Loader(Data(), batch_size=4, num_workers=1, device="cpu",
                             output="numpy")
    for batch in loader:
        pass
    slowest = pinwheel.distributed.slowest_rank(loader)
    loader.close()
    print(json.dumps({"rank": rank, "slowest": list(slowest)}), flush=True)
    dist.destroy_process_group()
""")


def test_slowest_rank_over_a_gloo_group_of_two_names_the_slow_rank(tmp_path):
    torch = import_torch("torch is not installed (slowest_rank gathers over torch.distributed)")
    if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
        pytest.fail("torch.distributed with gloo is not available")
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ranks = []
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   RANK=str(rank), WORLD_SIZE="2", OMP_NUM_THREADS="1")
        ranks.append(subprocess.Popen([sys.executable, str(script)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    results = []
    for p in ranks:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, out + err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert [r["rank"] for r in results] == [0, 1]
    # Every rank gets the same answer: rank 1, bound by its reads.
    assert results[0]["slowest"] == results[1]["slowest"], results
    rank, loader_bound, line = results[0]["slowest"]
    assert rank == 1 and loader_bound, line
    assert line.startswith("slowest rank 1 of 2: ") and "bound by reads" in line, line
