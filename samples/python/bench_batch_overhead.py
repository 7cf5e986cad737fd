#!/usr/bin/env python3
"""The Python side's cost of one batch: a Loader loop over tiny samples
(so that reading and copying them costs next to nothing) timed three ways,
per batch:

  next()      loader.next() in a loop (the extension's call, the Batch and
              its views), batch.release() after each
  iter        ``for batch in loader`` (adds the iterator's bookkeeping)
  iter+get    as iter, reading every field (batch[name]) as a training
              step does

With --python_dataset, instead: a pinwheel.Dataset of 16 fields whose
read() does nothing, read with num_workers=0: the CPU a sample of handing
read() its 16 numpy views.

On the host backend by default (any machine); --device=cuda:0 on a GPU.
Prints, per batch, the wall time and the CPU time of the calling thread
(time.thread_time: what the Python side itself spends, waiting excluded;
the better figure on a loaded machine), each the median of --repeat runs
with their range, and with --json one object a line.

  PYTHONPATH=build/samples/python python3 samples/python/bench_batch_overhead.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

# Import the built or installed pinwheel (PYTHONPATH or pip), not the
# sources beside this script, which lack the compiled extension.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
import pinwheel  # noqa: E402


def run(loader, batches: int, way: str, names) -> tuple:
    """(wall seconds, this thread's CPU seconds) for `batches` batches read
    `way`."""
    done = 0
    t0 = time.perf_counter()
    c0 = time.thread_time()
    while done < batches:
        if way == "next()":
            while done < batches:
                batch = loader.next()
                if batch is None:
                    break
                batch.release()
                done += 1
        else:
            for batch in loader:
                if way == "iter+get":
                    for name in names:
                        batch[name]
                done += 1
                if done == batches:
                    break
            del batch
    return time.perf_counter() - t0, time.thread_time() - c0


class _Empty(pinwheel.Dataset):
    """16 fields, a read() that writes nothing."""

    def __init__(self):
        super().__init__({f"f{i}": ("i64", (4,)) for i in range(16)}, size=4096)

    def read(self, index, sample):
        pass


def python_dataset_views(repeat: int) -> int:
    loader = pinwheel.Loader(_Empty(), batch_size=64, num_workers=0, device="cpu",
                             output="numpy")
    runs = []
    for _ in range(repeat):
        c0 = time.thread_time()
        samples = sum(batch.size for batch in loader)
        runs.append((time.thread_time() - c0) / samples * 1e6)
    print(f"python dataset, 16 fields, empty read(): {statistics.median(runs):.2f} us of CPU "
          f"a sample [{min(runs):.2f} - {max(runs):.2f}]")
    loader.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--output", default="numpy", help="numpy, dlpack or torch")
    parser.add_argument("--gather", default="off", help="off, auto or on")
    parser.add_argument("--fields", type=int, default=2, help="fields a sample")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--num_workers", type=int, default=1)
    parser.add_argument("--batches", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", default="", help="append one JSON object a row here")
    parser.add_argument("--python_dataset", action="store_true",
                        help="time read()'s views of a 16-field Python dataset instead")
    args = parser.parse_args()
    if args.python_dataset:
        return python_dataset_views(args.repeat)

    samples = 4096
    arrays = {f"f{i}": np.arange(samples * 4, dtype=np.int64).reshape(samples, 4)
              for i in range(args.fields)}
    data = pinwheel.ArrayDataset(arrays)
    names = list(arrays)
    loader = pinwheel.Loader(data, batch_size=args.batch_size, shuffle=True, seed=1,
                             drop_last=True, num_workers=args.num_workers, prefetch=8,
                             device_buffers=4, device=args.device, output=args.output,
                             gather=args.gather)
    stats = loader.stats()
    print(f"bench_batch_overhead: {loader.device}, output={args.output}, "
          f"gather={args.gather} (gather path: {stats['gather']}"
          f"{', ' + stats['gather_fallback'] if stats['gather_fallback'] else ''}), "
          f"{args.fields} fields, batch {args.batch_size}, {args.num_workers} workers, "
          f"{args.batches} batches x {args.repeat}", flush=True)
    run(loader, 500, "next()", names)  # warm-up
    for way in ("next()", "iter", "iter+get"):
        runs = [run(loader, args.batches, way, names) for _ in range(args.repeat)]
        wall = [w / args.batches * 1e6 for w, _ in runs]
        cpu = [c / args.batches * 1e6 for _, c in runs]
        print(f"  {way:9} wall {statistics.median(wall):7.2f} us a batch "
              f"[{min(wall):.2f} - {max(wall):.2f}]   CPU of this thread "
              f"{statistics.median(cpu):7.2f} us [{min(cpu):.2f} - {max(cpu):.2f}]", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(dict(way=way, wall_us=wall, cpu_us=cpu,
                                        device=loader.device, output=args.output,
                                        gather=args.gather, fields=args.fields,
                                        batch_size=args.batch_size)) + "\n")
    loader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
