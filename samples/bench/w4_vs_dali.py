#!/usr/bin/env python3
"""W4 on the GPU decode path: pinwheel against NVIDIA DALI, in one call
(issue 32: pinwheel decode="gpu" >= DALI's img/s at 4 threads with <= 4
cores, >= 1.1x DALI's peak with <= 6 cores; beside a compute step, the step
<= +3 % over the step alone).

Rows, run in rounds (every row once a round, the rounds --repeats times, so
a machine that slows for a while slows every row alike):
  dali          DALI's pipeline for W4: fn.readers.file (shuffled) ->
                fn.decoders.image_random_crop(device="mixed") (the hardware
                decoder and nvJPEG's CUDA decoder, DALI's default share
                unless --dali_hw_load) -> fn.resize(224, antialias) ->
                fn.crop_mirror_normalize(float16, CHW, random flip), read
                through DALIGenericIterator into torch tensors; one row per
                --threads count. Skipped, saying so, when nvidia.dali does
                not import.
  pinwheel-gpu  pinwheel_w4_decode --decode=gpu (nvJPEG, bf16 CHW): one row
                per --workers count, --gpu_priority and --gpu_check_threads.
With --gemm N every row runs a compute step after each batch (two bf16
GEMMs of N x N, torch for DALI, cuBLAS in pinwheel_w4_decode) and reports
its step time against the same step alone, timed in the same process.

Each row prints img/s and the process's cores (CPU seconds over wall
seconds, all threads); the table gives median [min-max] over the rounds and
each row against DALI at the same count and against DALI's best median.

  python3 samples/bench/w4_vs_dali.py --root /tmp/w4 \\
      --w4_decode build/samples/bench/pinwheel_w4_decode

The folder: build/samples/bench/make_images --out=/tmp/w4 --count=10000
--classes=100. Needs torch with CUDA; DALI for its rows
(../shared/device/stage-dali.sh stages it for the GPU machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import w4_rows  # samples/bench/w4_rows.py, beside this script

_MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
_STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def pinwheel_row(args, workers: int, priority: str, checks: int):
    """One repetition of pinwheel_w4_decode's gpu row: (img/s, cores,
    step overhead or None)."""
    flags = [f"--batch_size={args.batch}", f"--gpu_priority={priority}",
             f"--gpu_check_threads={checks}"]
    if args.gemm:
        flags.append(f"--compute_gemm_n={args.gemm}")
    return w4_rows.w4_decode_row(args.w4_decode, args.root, "gpu", workers,
                                 args.batches, *flags)


class GemmStep:
    """Two bf16 GEMMs of n x n on torch's current stream (W3's step)."""

    def __init__(self, n: int):
        import torch
        self.a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        self.c = torch.empty_like(self.a)

    def __call__(self):
        import torch
        torch.matmul(self.a, self.b, out=self.c)
        torch.matmul(self.c, self.b, out=self.c)

    def alone_ms(self, steps: int = 20) -> float:
        import torch
        for _ in range(3):
            self()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            self()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1000 / steps


def dali_row(args, threads: int, step):
    """One repetition of DALI's W4 pipeline: (img/s, cores, step overhead or
    None)."""
    import torch
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    decoder_args = {}
    if args.dali_hw_load is not None:
        decoder_args["hw_decoder_load"] = args.dali_hw_load

    @pipeline_def(batch_size=args.batch, num_threads=threads, device_id=0,
                  seed=1, prefetch_queue_depth=2)
    def w4():
        jpegs, labels = fn.readers.file(file_root=args.root,
                                        random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(
            jpegs, device="mixed", output_type=types.RGB,
            random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3],
            **decoder_args)
        images = fn.resize(images, resize_x=args.size, resize_y=args.size,
                           antialias=True)
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT16, output_layout="CHW", mean=_MEAN,
            std=_STD, mirror=fn.random.coin_flip())
        return images, labels.gpu()

    pipe = w4()
    pipe.build()
    it = DALIGenericIterator([pipe], ["image", "label"], reader_name="reader",
                             auto_reset=True)

    def one():
        try:
            batch = next(it)
        except StopIteration:
            batch = next(it)
        if step is not None:
            step()
        return batch[0]["image"].shape[0]

    for _ in range(5):
        one()
    torch.cuda.synchronize()
    cpu0 = sum(os.times()[:2])
    start = time.perf_counter()
    images = sum(one() for _ in range(args.batches))
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    cpu = sum(os.times()[:2]) - cpu0
    del it, pipe
    overhead = None
    if step is not None:
        overhead = wall * 1000 / args.batches / step.alone - 1
    return images / wall, cpu / wall, overhead


def variant(priority: str, checks: int) -> str:
    """"high, 8 checks" for a pinwheel row, "" for DALI's."""
    return f"{priority}, {checks} checks" if checks else ""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="make_images' folder")
    p.add_argument("--threads", type=int, nargs="+", default=[4, 14],
                   help="DALI's num_threads, a row each")
    p.add_argument("--workers", type=int, nargs="+", default=[4, 14],
                   help="pinwheel's workers, a row each")
    p.add_argument("--gpu_priority", nargs="+", default=["high"],
                   choices=["low", "high"],
                   help="pinwheel's decode stream priority, a row each")
    p.add_argument("--gpu_check_threads", type=int, nargs="+", default=[8],
                   help="pinwheel's threads for a batch's host checks, a "
                        "row each")
    p.add_argument("--dali_hw_load", type=float, default=None,
                   help="DALI's hw_decoder_load (default: DALI's own)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batches", type=int, default=40,
                   help="timed batches a repetition (after 5 of warm-up)")
    p.add_argument("--gemm", type=int, default=0,
                   help="> 0: a compute step of two bf16 GEMMs of this side "
                        "after each batch")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--w4_decode", default="",
                   help="pinwheel_w4_decode binary (the pinwheel rows)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("w4_vs_dali: needs a CUDA GPU")
        return 2
    rows = []
    try:
        import nvidia.dali  # noqa: F401
        rows += [("dali", t, "", 0) for t in args.threads]
    except ImportError as e:
        print(f"w4_vs_dali: DALI rows skipped: nvidia.dali does not import "
              f"({e})")
    if args.w4_decode:
        rows += [("pinwheel-gpu", w, prio, checks) for w in args.workers
                 for prio in args.gpu_priority
                 for checks in args.gpu_check_threads]
    else:
        print("w4_vs_dali: no --w4_decode: pinwheel rows skipped")
    if not rows:
        return 2
    step = None
    if args.gemm:
        step = GemmStep(args.gemm)
        step.alone = step.alone_ms()
        print(f"compute step alone (torch, two bf16 GEMMs of {args.gemm}): "
              f"{step.alone:.2f} ms", flush=True)
    results: dict[tuple, list[tuple]] = {}
    for r in range(args.repeats):
        for row in rows:
            name, count, prio, checks = row
            if name == "dali":
                got = dali_row(args, count, step)
            else:
                got = pinwheel_row(args, count, prio, checks)
            results.setdefault(row, []).append(got)
            rate, cores, overhead = got
            extra = "" if overhead is None else f" step {100 * overhead:+.1f} %"
            print(f"  round {r + 1}: {name:<12} {count:>2} "
                  f"{variant(prio, checks):<16} "
                  f"{rate:8.0f} img/s {cores:5.2f} cores{extra}", flush=True)
    print(f"W4 GPU decode: batch {args.batch} of RandomResizedCrop("
          f"{args.size}) + flip, 16-bit CHW on {torch.cuda.get_device_name()},"
          f" {os.cpu_count()} CPUs; median [min-max] of {args.repeats} rounds"
          + (f"; step = two bf16 GEMMs of {args.gemm} after each batch"
             if args.gemm else ""))
    medians = {row: statistics.median(x[0] for x in got)
               for row, got in results.items()}
    dali = {row[1]: m for row, m in medians.items() if row[0] == "dali"}
    peak = max(dali.values()) if dali else None
    summary = []
    for row, got in results.items():
        name, count, prio, checks = row
        rate, low, high = w4_rows.median_range(x[0] for x in got)
        cores = statistics.median(x[1] for x in got)
        line = {"workload": "w4_gpu", "row": name, "count": count,
                "priority": prio or None, "check_threads": checks or None,
                "img_per_s": rate, "img_per_s_min": low,
                "img_per_s_max": high, "spread": (high - low) / rate,
                "cores": cores, "repeats": len(got)}
        text = (f"  {name:<12} {count:>2} {variant(prio, checks):<16} "
                f"{rate:8.0f} img/s [{low:.0f}-{high:.0f}] spread "
                f"{100 * line['spread']:4.1f} % {cores:5.2f} cores")
        if got[0][2] is not None:
            line["step_overhead"] = statistics.median(x[2] for x in got)
            text += f"  step {100 * line['step_overhead']:+.1f} %"
        if count in dali:
            line["vs_dali_same_count"] = medians[row] / dali[count]
            text += f"  {line['vs_dali_same_count']:.2f}x DALI at {count}"
        if peak:
            line["vs_dali_peak"] = medians[row] / peak
            text += f"  {line['vs_dali_peak']:.2f}x DALI's peak"
        summary.append(line)
        print(text)
    if args.json:
        for line in summary:
            print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
