"""How Python read() calls share the GIL: samples/s of a pinwheel.Dataset
whose read() is pure Python against one whose work is numpy calls that
release the GIL, and a C++ dataset (ArrayDataset) for reference, with 1 and
more workers, on the host backend.

    PYTHONPATH=build/samples/python python samples/python/bench_gil.py [--workers 1 4]

Prints one line per (dataset, workers): samples/s (best of --repeats epochs).
Expect the pure-Python read to stay flat (or drop) as workers grow, since
one read runs at a time; the numpy read to scale with the cores the box
has, since np.matmul (BLAS) runs without the GIL. Run with
OPENBLAS_NUM_THREADS=1 so that BLAS itself does not use every core.
"""
import argparse
import os
import sys
import time

import numpy as np

# This folder holds the package's sources (pinwheel/) without the built
# extension: import the built or installed package (PYTHONPATH) instead.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

import pinwheel

SIDE = 128  # each sample: f32[SIDE, SIDE] (64 KiB)


class PurePython(pinwheel.Dataset):
    """Work in the interpreter: holds the GIL throughout."""

    def __init__(self, size, work):
        super().__init__({"x": ("f32", (SIDE, SIDE))}, size=size)
        self.work = work

    def read(self, index, sample):
        acc = 0
        for k in range(self.work):
            acc = (acc * 31 + k + index) % 1000003
        sample["x"][...] = acc


class NumpyReleasing(pinwheel.Dataset):
    """The same amount of time in numpy calls that release the GIL."""

    def __init__(self, size, base, rounds):
        super().__init__({"x": ("f32", (SIDE, SIDE))}, size=size)
        self.base, self.rounds = base, rounds

    def read(self, index, sample):
        out = sample["x"]
        for _ in range(self.rounds):
            np.matmul(self.base, self.base, out=out)  # BLAS: without the GIL


def direct_samples_per_s(dataset, size, repeats):
    """read() called in a loop on this thread, no loader: one core's rate."""
    sample = {"x": np.zeros((SIDE, SIDE), np.float32)}
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(size):
            dataset.read(i, sample)
        best = max(best, size / (time.perf_counter() - start))
    return best


def samples_per_s(dataset, workers, batch, repeats):
    best = 0.0
    with pinwheel.Loader(dataset, batch_size=batch, num_workers=workers, device="cpu",
                         output="numpy", prefetch=max(4, 2 * workers)) as loader:
        for _ in range(repeats):
            start = time.perf_counter()
            n = 0
            for b in loader:
                n += b.size
            best = max(best, n / (time.perf_counter() - start))
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=int, default=3000, help="pure-Python loop iterations")
    parser.add_argument("--rounds", type=int, default=4, help="numpy matmul rounds")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    base = rng.standard_normal((SIDE, SIDE)).astype(np.float32)
    cases = {
        "python-loop": PurePython(args.size, args.work),
        "numpy-releasing": NumpyReleasing(args.size, base, args.rounds),
        "cpp-arraydataset": pinwheel.ArrayDataset(
            {"x": np.zeros((args.size, SIDE, SIDE), np.float32)}),
    }
    print(f"# {os.cpu_count()} cores; OPENBLAS/OMP threads "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; "
          f"{args.size} samples of f32[{SIDE},{SIDE}], batch {args.batch}")
    for name, dataset in cases.items():
        if isinstance(dataset, pinwheel.Dataset):
            rate = direct_samples_per_s(dataset, args.size, args.repeats)
            print(f"{name:18s} direct     {rate:10.0f} samples/s  (read() in a loop, no loader)")
        for workers in args.workers:
            rate = samples_per_s(dataset, workers, args.batch, args.repeats)
            print(f"{name:18s} workers={workers}  {rate:10.0f} samples/s")


if __name__ == "__main__":
    main()
