"""samples/python/train.py, the torch trainer that checkpoints model,
optimizer and loader together: killed with SIGKILL at a random step and
resumed, its final weights are byte-identical to an uninterrupted run (CPU);
launched by torchrun on 2 CPU ranks (gloo) and resumed on 1, every sample of
the epoch is read exactly once. Skips, saying why, without torch or without
torchrun's gloo backend (CI has both: the README's test line installs
third_party/python-test-requirements.txt, and PINWHEEL_REQUIRE_TORCH=1 makes
these cases fail there instead of skipping)."""
import importlib.util
import os
import pathlib
import random
import re
import signal
import socket
import subprocess
import sys

import pytest

from conftest import REQUIRE_TORCH, import_torch

torch = import_torch("torch is not installed (the trainer needs it)")

TRAIN = pathlib.Path(__file__).resolve().parent.parent / "train.py"
COMMON = ["--samples", "256", "--batch_size", "8", "--epochs", "2", "--num_workers", "2"]


def run_train(*args, check=True):
    result = subprocess.run([sys.executable, str(TRAIN), *COMMON, *args], capture_output=True,
                            text=True, timeout=240, env=os.environ.copy())
    if check and result.returncode != 0:
        pytest.fail(f"train.py {' '.join(args)} failed ({result.returncode}):\n"
                    f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    return result


def read_log(path):
    """(rank, epoch, step, [indices]) per logged step."""
    rows = []
    for line in pathlib.Path(path).read_text().splitlines():
        rank, epoch, step, *indices = map(int, line.split())
        rows.append((rank, epoch, step, indices))
    return rows


def test_killed_at_a_random_step_and_resumed_ends_with_identical_weights(tmp_path):
    reference = tmp_path / "reference.bin"
    run_train("--weights_out", str(reference))
    total = 2 * 256 // 8

    seed = random.randrange(1 << 30)
    kill_at = random.Random(seed).randrange(2, total - 1)
    print(f"kill at step {kill_at} (seed {seed})")
    checkpoints = tmp_path / "checkpoints"
    args = ["--checkpoint_dir", str(checkpoints), "--checkpoint_every", "3",
            "--weights_out", str(tmp_path / "resumed.bin")]
    victim = subprocess.Popen([sys.executable, str(TRAIN), *COMMON, *args, "--step_delay", "0.05"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for line in victim.stdout:
            if line.startswith(f"rank 0: step {kill_at} "):
                victim.send_signal(signal.SIGKILL)
                break
        else:
            pytest.fail(f"train.py ended before step {kill_at}")
    finally:
        victim.stdout.close()
        victim.wait(timeout=60)
    assert victim.returncode == -signal.SIGKILL
    assert not (tmp_path / "resumed.bin").exists()

    resumed = run_train(*args, "--resume")
    # "step k" is printed after step k-1's checkpoint was written, and the
    # kill lands at step k or a little later: the resumed step is a
    # multiple of 3, at least (k - 1) // 3 * 3.
    saved = (kill_at - 1) // 3 * 3
    match = re.search(r"resumed at step (\d+),", resumed.stdout)
    assert match or saved == 0, resumed.stdout[:300]
    if match:
        assert int(match.group(1)) % 3 == 0 and int(match.group(1)) >= saved
    assert f"done after step {total}" in resumed.stdout
    assert (tmp_path / "resumed.bin").read_bytes() == reference.read_bytes(), \
        f"killed at step {kill_at}: weights differ"


def test_stopped_and_resumed_at_an_epoch_boundary_ends_with_identical_weights(tmp_path):
    reference = tmp_path / "reference.bin"
    run_train("--weights_out", str(reference), "--data", "tokens")
    checkpoints = ["--checkpoint_dir", str(tmp_path / "c"), "--checkpoint_every", "32",
                   "--data", "tokens", "--weights_out", str(tmp_path / "resumed.bin")]
    run_train(*checkpoints, "--stop_after_steps", "32")  # the end of epoch 0
    resumed = run_train(*checkpoints, "--resume")
    assert "resumed at step 32," in resumed.stdout
    assert (tmp_path / "resumed.bin").read_bytes() == reference.read_bytes()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


HAS_GLOO = (hasattr(torch, "distributed") and torch.distributed.is_available()
            and torch.distributed.is_gloo_available())


@pytest.mark.skipif(not HAS_GLOO and not REQUIRE_TORCH,
                    reason="torch.distributed with gloo is not available")
def test_two_torchrun_ranks_resumed_on_one_read_every_sample_of_the_epoch_once(tmp_path):
    assert HAS_GLOO, "PINWHEEL_REQUIRE_TORCH=1 but this torch has no torch.distributed with gloo"
    checkpoints = tmp_path / "checkpoints"
    before, after = tmp_path / "before.log", tmp_path / "after.log"
    common = [*COMMON, "--epochs", "1", "--checkpoint_dir", str(checkpoints),
              "--checkpoint_every", "5"]
    launched = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
         f"--master_port={free_port()}", str(TRAIN), *common, "--stop_after_steps", "5",
         "--sample_log", str(before)],
        capture_output=True, text=True, timeout=240)
    assert launched.returncode == 0, launched.stdout[-2000:] + launched.stderr[-4000:]
    resumed = subprocess.run([sys.executable, str(TRAIN), *common, "--resume",
                              "--sample_log", str(after)],
                             capture_output=True, text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "(saved by 2 rank(s), now 1)" in resumed.stdout

    first = read_log(before)
    assert {rank for rank, *_ in first} == {0, 1}
    assert {step for _, _, step, _ in first} == {1, 2, 3, 4, 5}
    rest = read_log(after)
    assert {rank for rank, *_ in rest} == {0} and rest[0][2] == 6
    delivered = [i for *_, indices in first + rest for i in indices]
    assert len(delivered) == 256
    assert sorted(delivered) == list(range(256))  # every sample exactly once


def load_train_module():
    spec = importlib.util.spec_from_file_location("pinwheel_sample_train", TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_checkpoint_write_that_fails_midway_leaves_the_old_one(tmp_path, monkeypatch):
    train = load_train_module()
    train.save_atomically({"step": 1}, str(tmp_path))

    def half_then_fail(obj, f):
        f.write(b"PK\x03\x04 half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(train.torch, "save", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        train.save_atomically({"step": 2}, str(tmp_path))
    monkeypatch.undo()
    assert train.load_checkpoint(str(tmp_path)) == {"step": 1}
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.pt"]  # no temporary left


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (the GPU machine)")
def test_on_the_gpu_killed_and_resumed_ends_with_identical_weights(tmp_path):
    reference = tmp_path / "reference.bin"
    run_train("--weights_out", str(reference), "--device", "cuda")
    args = ["--device", "cuda", "--checkpoint_dir", str(tmp_path / "c"),
            "--checkpoint_every", "7", "--weights_out", str(tmp_path / "resumed.bin")]
    victim = subprocess.Popen([sys.executable, str(TRAIN), *COMMON, *args, "--step_delay", "0.05"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in victim.stdout:
        if line.startswith("rank 0: step 23 "):
            victim.send_signal(signal.SIGKILL)
            break
    victim.stdout.close()
    victim.wait(timeout=60)
    resumed = run_train(*args, "--resume")
    match = re.search(r"resumed at step (\d+),", resumed.stdout)
    assert match and int(match.group(1)) % 7 == 0 and int(match.group(1)) >= 21
    assert (tmp_path / "resumed.bin").read_bytes() == reference.read_bytes()
