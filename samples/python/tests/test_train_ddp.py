"""samples/python/train_ddp.py, the data-parallel image trainer of issue 30,
at CI's size: a tiny conv net on a small JPEG folder on the host backend,
two torchrun ranks with gloo fed by pinwheel (decode="cpu"), and one
process each for the synthetic batch and torch's DataLoader (which needs
torchvision: without it the run must fail saying so). Every run must print
its per-rank line (images/s, waited for data, cores used) and rank 0's
total and JSON line. The torch cases skip, saying why, without torch (CI
has it, and PINWHEEL_REQUIRE_TORCH=1 makes them fail there instead)."""
import importlib.util
import json
import os
import pathlib
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

import pinwheel
from conftest import import_torch

TRAIN = pathlib.Path(__file__).resolve().parent.parent / "train_ddp.py"
RANK_LINE = re.compile(r"rank (\d)/(\d): (\S+) tiny batch 8: (\d+) images/s, waited for data "
                       r"([0-9.]+) %, cores used ([0-9.]+) \(", re.M)
SMALL = ["--model", "tiny", "--size", "32", "--batch_size", "8", "--workers", "1",
         "--steps", "3", "--warmup", "1", "--device", "cpu"]


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """Two classes of 12 small striped JPEGs, root/<class>/<i>.jpg."""
    root = tmp_path_factory.mktemp("train_ddp") / "images"
    rng = np.random.default_rng(3)
    for k in range(2):
        (root / f"c{k}").mkdir(parents=True)
        for i in range(12):
            pixels = rng.integers(0, 256, size=(40, 48, 3), dtype=np.uint8)
            pixels[:, ::4 if k == 0 else 1, k] = 255
            (root / f"c{k}" / f"{i}.jpg").write_bytes(pinwheel.encode_jpeg(pixels))
    return str(root)


def run(args, torchrun=False, timeout=180):
    command = [sys.executable]
    if torchrun:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        command += ["-m", "torch.distributed.run", "--nproc_per_node=2",
                    f"--master_port={port}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):  # not a launched rank
        env.pop(name, None)
    return subprocess.run([*command, str(TRAIN), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def last_json(out):
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, out
    return json.loads(lines[-1])


def test_bad_arguments_are_refused_naming_them(tmp_path):
    result = run(["--loader", "pinwheel-cpu"])
    assert result.returncode == 2 and "--loader pinwheel-cpu needs --root" in result.stderr
    result = run(["--loader", "dataloader", "--root", str(tmp_path / "missing")])
    assert result.returncode == 2 and "no such folder" in result.stderr
    assert "make_images" in result.stderr
    result = run(["--loader", "synthetic", "--steps", "0"])
    assert result.returncode == 2 and "--steps 0: must be >= 1" in result.stderr
    result = run(["--loader", "nvidia-dali"])
    assert result.returncode == 2 and "invalid choice: 'nvidia-dali'" in result.stderr
    result = run(["--loader", "synthetic", "--worker_nice", "20"])
    assert result.returncode == 2 and "--worker_nice 20: must be 0..19" in result.stderr


def test_two_gloo_ranks_train_on_pinwheel_and_each_reports_its_rate(jpegs, tmp_path):
    torch = import_torch("torch is not installed (train_ddp.py needs it)")
    if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
        pytest.fail("torch.distributed with gloo is not available: the 2-rank case cannot run")
    results = tmp_path / "results.jsonl"
    result = run(["--root", jpegs, "--loader", "pinwheel-cpu", *SMALL, "--json", str(results)],
                 torchrun=True)
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-4000:]
    ranks = sorted((int(m[0]), int(m[1]), m[2]) for m in RANK_LINE.findall(out))
    assert ranks == [(0, 2, "pinwheel-cpu"), (1, 2, "pinwheel-cpu")], out
    for m in RANK_LINE.findall(out):
        # Cores used may round to 0.00 on a loaded machine (a few ms of CPU
        # over seconds of wall); the CPU seconds themselves must not be 0.
        assert int(m[3]) > 0 and 0 <= float(m[4]) <= 100 and float(m[5]) >= 0, m
    assert re.search(r"^all 2 rank\(s\): pinwheel-cpu tiny batch 8 a rank: \d+ images/s", out,
                     re.M), out
    # The slowest rank's line (pinwheel.distributed.slowest_rank).
    assert re.search(r"^loader: (slowest rank [01] of 2: |no rank waits for data: the slowest, "
                     r"rank [01] of 2, )Next\(\) waits for data p50 ", out, re.M), out
    summary = last_json(out)
    assert summary["slowest_rank"] in (0, 1)
    assert summary["kind"] == "train_ddp" and summary["world_size"] == 2
    assert summary["loader"] == "pinwheel-cpu" and summary["batch_per_rank"] == 8
    assert sorted(r["rank"] for r in summary["ranks"]) == [0, 1]
    assert summary["images_per_s"] > 0 and summary["cores"] > 0
    assert all(r["cpu_seconds"] > 0 for r in summary["ranks"]), summary
    assert json.loads(results.read_text().splitlines()[-1]) == summary


def test_niced_pinwheel_workers_train_and_the_run_says_so(jpegs):
    import_torch("torch is not installed (train_ddp.py needs it)")
    result = run(["--root", jpegs, "--loader", "pinwheel-cpu", *SMALL, "--worker_nice", "5"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-4000:]
    summary = last_json(result.stdout)
    assert summary["loader"] == "pinwheel-cpu" and summary["worker_nice"] == 5, summary


def test_the_synthetic_batch_runs_without_a_folder(tmp_path):
    import_torch("torch is not installed (train_ddp.py needs it)")
    result = run(["--loader", "synthetic", *SMALL, "--classes", "10"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-4000:]
    assert [m[2] for m in RANK_LINE.findall(result.stdout)] == ["synthetic"], result.stdout
    summary = last_json(result.stdout)
    assert summary["world_size"] == 1 and summary["loader"] == "synthetic"


def test_the_dataloader_runs_with_torchvision_or_says_it_needs_it(jpegs):
    import_torch("torch is not installed (train_ddp.py needs it)")
    result = run(["--root", jpegs, "--loader", "dataloader", *SMALL])
    if importlib.util.find_spec("torchvision") is None:
        assert result.returncode == 2, result.stdout + result.stderr
        assert "--loader dataloader needs torchvision" in result.stderr, result.stderr
        return
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-4000:]
    assert [m[2] for m in RANK_LINE.findall(result.stdout)] == ["dataloader"], result.stdout
    assert last_json(result.stdout)["loader"] == "dataloader"


def test_gpu_decode_without_a_gpu_fails_saying_why(jpegs):
    result = run(["--root", jpegs, "--loader", "pinwheel-gpu", *SMALL])
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--loader pinwheel-gpu decodes with nvJPEG: it needs --device cuda" in result.stderr
