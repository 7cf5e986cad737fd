#!/usr/bin/env python3
"""W4 on the CPU decode path: pinwheel against torchvision's DataLoader at
equal workers, in one call (issue 32, goal: pinwheel decode="cpu" >= 1.0x
DataLoader's img/s at equal workers, stretch 1.3x).

Rows, for each --workers count, run in rounds (every row once a round, the
rounds --repeats times, so a machine that slows for a while slows every
row alike):
  torchvision   DataLoader over decode_jpeg + v2 RandomResizedCrop(224,
                antialias) + RandomHorizontalFlip, pin_memory, normalised to
                bf16 on the GPU (samples/python/bench_images.py's row)
  pinwheel-py   pinwheel.ImageFolder(root, train=True, size=224) decoded by
                the workers (libjpeg-turbo), NormalizeImage to bf16 on the
                device stage (bench_images.py's row)
  pinwheel-cpp  pinwheel_w4_decode --decode=cpu (the C++ loader, one
                process), when --w4_decode names the binary
Each row prints img/s, the process's cores (CPU seconds over wall seconds,
DataLoader's worker processes included) and img/s per core: median and
[min-max] over the rounds; then pinwheel / DataLoader at each worker count.

  python3 samples/bench/w4_cpu_vs_dataloader.py --root /tmp/w4 \\
      --workers 4 8 14 --w4_decode build/samples/bench/pinwheel_w4_decode

The folder: build/samples/bench/make_images --out=/tmp/w4 --count=10000
--classes=100. Needs torch with CUDA, torchvision and psutil (the
pinwheel-py row also the pinwheel package).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_here, "..", "python"))
import bench_images  # noqa: E402  (samples/python/bench_images.py)
import w4_rows  # noqa: E402  (samples/bench/w4_rows.py, beside this script)

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="make_images' folder")
    p.add_argument("--workers", type=int, nargs="+", default=[4, 8, 14])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--epochs", type=int, default=1,
                   help="whole epochs a Python repetition times (after a "
                        "warm-up epoch)")
    p.add_argument("--cpp_batches", type=int, default=40,
                   help="timed batches of a pinwheel-cpp repetition")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rows", nargs="+",
                   default=["torchvision", "pinwheel-py", "pinwheel-cpp"],
                   choices=["torchvision", "pinwheel-py", "pinwheel-cpp"])
    p.add_argument("--w4_decode", default="",
                   help="pinwheel_w4_decode binary (the pinwheel-cpp row)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("w4_cpu_vs_dataloader: needs a CUDA GPU (W4 delivers bf16 on "
              "the device)")
        return 2
    rows = list(args.rows)
    if "pinwheel-cpp" in rows and not args.w4_decode:
        print("w4_cpu_vs_dataloader: no --w4_decode: pinwheel-cpp skipped")
        rows.remove("pinwheel-cpp")
    paths, labels = bench_images.list_images(args.root)
    # (row, workers) -> [(img/s, cores)]
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for r in range(args.repeats):
        for workers in args.workers:
            for row in list(rows):
                one = argparse.Namespace(**vars(args))
                one.repeats = 1
                if row == "torchvision":
                    (n, s, c), = bench_images.torchvision_row(
                        paths, labels, workers, one)
                    rate, cores = n / s, c / s
                elif row == "pinwheel-py":
                    got = bench_images.pinwheel_row(workers, one)
                    if got is None:
                        print("w4_cpu_vs_dataloader: this pinwheel has no "
                              "ImageFolder; pinwheel-py skipped")
                        rows.remove(row)
                        continue
                    (n, s, c), = got
                    rate, cores = n / s, c / s
                else:
                    rate, cores, _ = w4_rows.w4_decode_row(
                        args.w4_decode, args.root, "cpu", workers,
                        args.cpp_batches)
                results.setdefault((row, workers), []).append((rate, cores))
                print(f"  round {r + 1}: {row:<12} {workers:>2} workers "
                      f"{rate:8.0f} img/s {cores:5.2f} cores", flush=True)
    print(f"W4 CPU decode: {len(paths)} JPEGs, batch {args.batch} of "
          f"RandomResizedCrop({args.size}) + flip, bf16 on "
          f"{torch.cuda.get_device_name()}, {os.cpu_count()} CPUs; median "
          f"[min-max] of {args.repeats} rounds")
    summary = []
    for workers in args.workers:
        base = results.get(("torchvision", workers))
        base_rate = statistics.median(x for x, _ in base) if base else None
        for row in rows:
            got = results.get((row, workers))
            if not got:
                continue
            rate, low, high = w4_rows.median_range(x for x, _ in got)
            cores = statistics.median(c for _, c in got)
            per_core = statistics.median(x / c for x, c in got if c > 0)
            ratio = rate / base_rate if base_rate else float("nan")
            line = {"workload": "w4_cpu", "row": row, "workers": workers,
                    "img_per_s": rate, "img_per_s_min": low,
                    "img_per_s_max": high, "cores": cores,
                    "img_per_s_per_core": per_core,
                    "vs_dataloader": ratio, "repeats": len(got)}
            summary.append(line)
            print(f"  {row:<12} {workers:>2} workers {rate:8.0f} img/s "
                  f"[{low:.0f}-{high:.0f}] {cores:5.2f} cores "
                  f"{per_core:6.0f} img/s/core  {ratio:5.2f}x DataLoader")
    if args.json:
        for line in summary:
            print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
