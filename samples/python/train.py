"""A small torch trainer fed by pinwheel that survives being killed: it
checkpoints model, optimizer and loader state together, atomically, and
resumes exactly where the last checkpoint stood.

    PYTHONPATH=build/samples/python python samples/python/train.py \\
        --checkpoint_dir /tmp/run --checkpoint_every 20 --epochs 3 [--resume]

    # two ranks on the CPU (gloo), resumable later on any number of ranks:
    PYTHONPATH=build/samples/python torchrun --nproc_per_node=2 \\
        samples/python/train.py --checkpoint_dir /tmp/run ...

Data: synthetic records (--data records: x f32[16], a class label i64 that
a fixed random linear map of x decides; an ArrayDataset) or token windows
(--data tokens: a flat u16 token file written at start, next-token
prediction with an embedding and a linear layer; TokenWindows). Model: an
MLP (records) or embedding + linear (tokens), SGD with momentum.

Exactness: the CPU run is deterministic (one torch thread, deterministic
algorithms); the loader resumes from its state_dict() with the very batches
the uninterrupted run would have read, so a run killed at any step and
resumed with --resume ends with weights byte-identical to a run never
interrupted (tests/test_train.py checks it). Across ranks, rank 0 writes
the checkpoint (every rank's loader state is the same but for the rank);
resuming with another number of ranks deals the rest of the epoch over
them, every remaining sample exactly once.

Checkpoint: <checkpoint_dir>/checkpoint.pt, written to a temporary file in
the same directory, flushed and fsync'ed, then renamed over the old one
(and the directory fsync'ed): a kill at any moment leaves the previous
checkpoint or the new one, never half of one.

Outputs: --weights_out (the final parameters' raw bytes, in order) and
--sample_log (one line per step: "rank epoch step index...", for tests).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

# This folder holds the package's sources (pinwheel/) without the built
# extension: import the built or installed package (PYTHONPATH) instead.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
import torch
import torch.distributed as dist

import pinwheel

FEATURES, CLASSES, VOCAB, SEQ_LEN = 16, 4, 64, 16


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", choices=["records", "tokens"], default="records")
    p.add_argument("--samples", type=int, default=256, help="records (or token windows)")
    p.add_argument("--batch_size", type=int, default=8, help="per rank")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--num_workers", type=int, default=2)
    p.add_argument("--device", default="cpu", help="cpu (CI) or cuda (the GPU machine)")
    p.add_argument("--checkpoint_dir", default=None)
    p.add_argument("--checkpoint_every", type=int, default=0, help="steps; 0: never")
    p.add_argument("--resume", action="store_true",
                   help="continue from <checkpoint_dir>/checkpoint.pt if it exists")
    p.add_argument("--stop_after_steps", type=int, default=0,
                   help="exit (as if preempted) after this global step; 0: run to the end")
    p.add_argument("--step_delay", type=float, default=0.0,
                   help="seconds to sleep after each step (tests kill a run mid-way)")
    p.add_argument("--weights_out", default=None)
    p.add_argument("--sample_log", default=None)
    args = p.parse_args(argv)
    if args.checkpoint_every and not args.checkpoint_dir:
        p.error("--checkpoint_every needs --checkpoint_dir")
    if args.resume and not args.checkpoint_dir:
        p.error("--resume needs --checkpoint_dir")
    return args


def make_dataset(args, rank):
    rng = np.random.default_rng(args.seed)
    if args.data == "records":
        x = rng.standard_normal((args.samples, FEATURES)).astype(np.float32)
        w = rng.standard_normal((FEATURES, CLASSES)).astype(np.float32)
        y = (x @ w).argmax(axis=1).astype(np.int64)
        return pinwheel.ArrayDataset({"x": x, "y": y})
    # A flat token file (a repeating pattern with noise), the same on every
    # rank: written by each rank to its own temporary file.
    tokens = (np.arange(args.samples * 4 + SEQ_LEN + 1) * 7 % VOCAB).astype(np.uint16)
    noise = rng.integers(0, VOCAB, tokens.size).astype(np.uint16)
    tokens = np.where(rng.random(tokens.size) < 0.1, noise, tokens).astype(np.uint16)
    fd, path = tempfile.mkstemp(prefix=f"pinwheel-tokens-{rank}-", suffix=".bin")
    with os.fdopen(fd, "wb") as f:
        f.write(tokens.tobytes())
    data = pinwheel.TokenWindows(path, SEQ_LEN, windows=args.samples, seed=args.seed)
    os.unlink(path)  # memory-mapped: stays readable
    return data


def make_model(args):
    torch.manual_seed(args.seed)
    if args.data == "records":
        return torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.ReLU(),
                                   torch.nn.Linear(32, CLASSES))
    return torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, VOCAB))


def loss_of(args, model, batch, device):
    if args.data == "records":
        x, y = batch["x"].to(device), batch["y"].to(device)
        return torch.nn.functional.cross_entropy(model(x), y)
    inputs, targets = batch["input"].to(device), batch["target"].to(device)
    logits = model(inputs)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def save_atomically(state, directory):
    """Writes `state` to <directory>/checkpoint.pt through a temporary file,
    fsync and rename: a reader (or a resume after a kill) sees the old
    checkpoint or the new one, whole."""
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, "checkpoint.pt")
    fd, tmp = tempfile.mkstemp(prefix=".checkpoint.pt.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load_checkpoint(directory):
    path = os.path.join(directory, "checkpoint.pt")
    if not os.path.exists(path):
        return None
    return torch.load(path, weights_only=False)  # our own file: bytes + tensors


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    if args.device != "cpu":  # deterministic cuBLAS (before CUDA starts)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    launched = "WORLD_SIZE" in os.environ or "OMPI_COMM_WORLD_SIZE" in os.environ
    env = pinwheel.launch_environment()
    if launched and env.world_size > 1:
        dist.init_process_group("gloo", rank=env.rank, world_size=env.world_size)
    rank, world = env.rank, env.world_size
    device = torch.device(args.device if args.device == "cpu" else f"cuda:{env.local_rank}")

    model = make_model(args).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    state = load_checkpoint(args.checkpoint_dir) if args.resume else None
    step = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
        print(f"rank {rank}: resumed at step {step}, epoch {state['loader']['epoch']}, "
              f"position {state['loader']['position']} (saved by {state['world_size']} "
              f"rank(s), now {world})", flush=True)

    loader = pinwheel.Loader(
        make_dataset(args, rank), batch_size=args.batch_size, shuffle=True, seed=args.seed,
        num_workers=args.num_workers, output="torch",
        device="cpu" if device.type == "cpu" else "auto",
        distributed="launcher" if world > 1 or launched else None,
        resume=state["loader"] if state is not None else None)
    log = open(args.sample_log, "a") if args.sample_log else None
    try:
        while loader.epoch < args.epochs:
            epoch = loader.epoch
            for batch in loader:
                loss = loss_of(args, model, batch, device)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if world > 1:
                    for p in model.parameters():
                        dist.all_reduce(p.grad)
                        p.grad /= world
                optimizer.step()
                step += 1
                if log is not None:
                    log.write(f"{rank} {epoch} {step} {' '.join(map(str, batch.indices))}\n")
                    log.flush()
                print(f"rank {rank}: step {step} epoch {epoch} loss {loss.item():.6f}", flush=True)
                if args.checkpoint_every and step % args.checkpoint_every == 0:
                    # Every rank's loader stands at the same place (one batch
                    # per rank per step): rank 0's state resumes the job.
                    if rank == 0:
                        save_atomically({"model": model.state_dict(),
                                         "optimizer": optimizer.state_dict(),
                                         "loader": loader.state_dict(), "step": step,
                                         "world_size": world}, args.checkpoint_dir)
                    if world > 1:
                        dist.barrier()
                    print(f"rank {rank}: checkpoint at step {step}", flush=True)
                if args.stop_after_steps and step == args.stop_after_steps:
                    print(f"rank {rank}: stopping after step {step}", flush=True)
                    return 0
                if args.step_delay:
                    time.sleep(args.step_delay)
        if args.weights_out and rank == 0:
            with open(args.weights_out, "wb") as f:
                for p in model.parameters():
                    f.write(p.detach().cpu().contiguous().numpy().tobytes())
        print(f"rank {rank}: done after step {step}", flush=True)
        return 0
    finally:
        if log is not None:
            log.close()
        loader.close()
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
