#!/usr/bin/env python3
"""pinwheel against torch's DataLoader(pin_memory=True) in one process, on
the workloads of samples/bench (see bench_main.cc there):

  W1  images: 256 x (u8[3,224,224], i64 label) a batch from 2048 in-memory
      samples; the rate batches reach the GPU
  W2  tokens: 32 windows of 1024 tokens (i64 input and target) a batch from a
      file of 50M u16 tokens
  W3  W1 with two bf16 8192^2 GEMMs after each batch on the current stream,
      against the GEMMs alone: the step time and its overhead

Both loaders end each batch the same way: fields on the GPU, the current
stream ordered after the copy (pinwheel: its hand-over; DataLoader:
.to("cuda", non_blocking=True) from its pinned batch). Timed after warm-up
batches, between two torch.cuda.synchronize(). Prints a table with the
ratio of each row to DataLoader's, and with --json one object a line.

  python3 samples/python/bench_vs_torch.py            # the GPU machine
  python3 samples/python/bench_vs_torch.py --smoke    # tiny, any machine
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.utils.data as tud

# The script's own folder holds the package's sources without the compiled
# extension: import the built or installed pinwheel (PYTHONPATH or pip), not
# those.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
import pinwheel  # noqa: E402


def make_images(samples: int, side: int):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(samples, 3, side, side), dtype=np.uint8)
    labels = (np.arange(samples) % 1000).astype(np.int64)
    return images, labels


def ensure_token_file(path: str, tokens: int) -> None:
    if os.path.exists(path) and os.path.getsize(path) == tokens * 2:
        return
    rng = np.random.default_rng(3)
    tmp = f"{path}.tmp.{os.getpid()}"
    rng.integers(0, 50257, size=tokens, dtype=np.uint16).tofile(tmp)
    os.replace(tmp, path)


class TorchImages(tud.Dataset):
    """W1 for DataLoader: one (image, label) pair of tensors per index."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return torch.from_numpy(self.images[i]), torch.tensor(self.labels[i])


class TorchTokens(tud.Dataset):
    """W2 for DataLoader: nanoGPT's get_batch as a dataset (np.memmap,
    a window at a position fixed by the index)."""

    def __init__(self, path, seq_len, windows, seed=5):
        self.path, self.seq_len = path, seq_len
        tokens = os.path.getsize(path) // 2
        self.starts = np.random.default_rng(seed).integers(0, tokens - seq_len - 1, size=windows)
        self.data = None

    def __len__(self):
        return len(self.starts)

    def __getitem__(self, i):
        if self.data is None:  # opened in each worker
            self.data = np.memmap(self.path, dtype=np.uint16, mode="r")
        s = int(self.starts[i])
        chunk = self.data[s:s + self.seq_len + 1].astype(np.int64)
        return torch.from_numpy(chunk[:-1]), torch.from_numpy(chunk[1:])


class Gemms:
    """W3's compute step: C = A.B then D = C.B, bf16 n x n."""

    def __init__(self, n):
        self.a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)

    def __call__(self):
        c = self.a @ self.b
        return c @ self.b

    def time_alone_ms(self, steps, warmup=3):
        for _ in range(warmup):
            self()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            self()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / steps * 1e3


def endless(loader):
    """Batches across epochs."""
    while True:
        for batch in loader:
            yield batch


def time_batches(batches, count, warmup, step=None, to_gpu=None):
    """Seconds for `count` batches after `warmup` ones; bytes moved."""
    nbytes = 0
    for i in range(warmup + count):
        if i == warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        batch = next(batches)
        fields = to_gpu(batch) if to_gpu else batch
        if i >= warmup:
            nbytes += sum(t.nbytes for t in fields.values())
        if step is not None:
            step()
        del batch, fields
    torch.cuda.synchronize()
    return time.perf_counter() - t0, nbytes


def dataloader_to_gpu(names):
    def to_gpu(batch):
        return {n: t.to("cuda", non_blocking=True) for n, t in zip(names, batch)}
    return to_gpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="w1,w2,w3")
    parser.add_argument("--dl_workers", type=int, default=8, help="DataLoader num_workers")
    parser.add_argument("--batches", type=int, default=60, help="timed W1/W3 batches a row")
    parser.add_argument("--w2_batches", type=int, default=2000, help="timed W2 batches a row")
    parser.add_argument("--dl_w2_batches", type=int, default=300,
                        help="timed W2 batches of the DataLoader row (slower)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--token_file", default="/tmp/pinwheel_bench_tokens_50000000.u16")
    parser.add_argument("--json", default="", help="append one JSON object a row here")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes")
    args = parser.parse_args()

    if not torch.cuda.is_available():
        print("bench_vs_torch: no CUDA device; nothing to compare", file=sys.stderr)
        return 1
    sizes = dict(samples=2048, side=224, image_batch=256, tokens=50_000_000, seq_len=1024,
                 token_batch=32, gemm=8192)
    if args.smoke:
        sizes = dict(samples=64, side=32, image_batch=16, tokens=200_000, seq_len=128,
                     token_batch=8, gemm=256)
        args.batches, args.w2_batches, args.dl_w2_batches = 8, 32, 16
        args.token_file = "/tmp/pinwheel_bench_tokens_smoke.u16"
    props = torch.cuda.get_device_properties(0)
    print(f"bench_vs_torch: {props.name}, torch {torch.__version__}, {os.cpu_count()} cores, "
          f"DataLoader(num_workers={args.dl_workers}, pin_memory=True)")
    rows = []

    def report(workload, name, seconds, batches, nbytes, base, extra=None):
        rate = batches / seconds
        row = dict(workload=workload, row=name, batches_per_s=rate, gbps=nbytes / seconds / 1e9,
                   ms_per_batch=seconds / batches * 1e3)
        if extra:
            row.update(extra)
        key = "ms_per_batch" if workload == "W3" else "batches_per_s"
        if base is not None:
            row["vs_dataloader"] = (base[key] / row[key]) if workload == "W3" else row[key] / base[key]
        rows.append(row)
        overhead = f"  {row['overhead_pct']:+7.1f} %" if "overhead_pct" in row else ""
        ratio = f"  x{row['vs_dataloader']:.2f}" if "vs_dataloader" in row else "  (baseline)"
        print(f"{workload:3} {name:46} {rate:10.0f} batches/s {row['gbps']:7.2f} GB/s "
              f"{row['ms_per_batch']:8.3f} ms{overhead}{ratio}", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
        return row

    workloads = [w for w in args.workloads.split(",") if w]
    images = labels = None
    if {"w1", "w3"} & set(workloads):
        images, labels = make_images(sizes["samples"], sizes["side"])

    def dataloader(dataset, batch_size):
        return tud.DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True,
                              num_workers=args.dl_workers, pin_memory=True,
                              persistent_workers=args.dl_workers > 0)

    def image_rows(workload, step=None, alone_ms=None):
        def extra(seconds, batches):
            if alone_ms is None:
                return None
            ms = seconds / batches * 1e3
            return dict(compute_alone_ms=alone_ms, overhead_pct=(ms / alone_ms - 1) * 100)

        dl = dataloader(TorchImages(images, labels), sizes["image_batch"])
        s, nbytes = time_batches(endless(dl), args.batches, args.warmup, step,
                                 dataloader_to_gpu(["image", "label"]))
        base = report(workload, f"DataLoader pin_memory, {args.dl_workers} workers", s,
                      args.batches, nbytes, None, extra(s, args.batches))
        del dl
        data = pinwheel.ArrayDataset({"image": images, "label": labels})
        for workers, prefetch, gather in [(8, 4, "off"), (14, 8, "off"), (1, 8, "on")]:
            with pinwheel.Loader(data, batch_size=sizes["image_batch"], shuffle=True, seed=7,
                                 drop_last=True, num_workers=workers, prefetch=prefetch,
                                 device_buffers=3, device="cuda:0", gather=gather) as loader:
                s, nbytes = time_batches(endless(loader), args.batches, args.warmup, step)
            path = "gather" if gather == "on" else f"{workers} workers"
            report(workload, f"pinwheel, {path}, prefetch {prefetch}", s,
                   args.batches, nbytes, base, extra(s, args.batches))

    for workload in workloads:
        if workload == "w1":
            image_rows("W1")
        elif workload == "w2":
            ensure_token_file(args.token_file, sizes["tokens"])
            windows = sizes["tokens"] // (sizes["seq_len"] + 1)
            dl = dataloader(TorchTokens(args.token_file, sizes["seq_len"], windows),
                            sizes["token_batch"])
            s, nbytes = time_batches(endless(dl), args.dl_w2_batches, args.warmup, None,
                                     dataloader_to_gpu(["input", "target"]))
            base = report("W2", f"DataLoader pin_memory, {args.dl_workers} workers", s,
                          args.dl_w2_batches, nbytes, None)
            del dl
            data = pinwheel.TokenWindows(args.token_file, seq_len=sizes["seq_len"], seed=5)
            for workers, prefetch, buffers, gather in [(4, 16, 4, "off"), (8, 32, 4, "off"),
                                                       (1, 32, 4, "on")]:
                with pinwheel.Loader(data, batch_size=sizes["token_batch"], shuffle=True, seed=7,
                                     drop_last=True, num_workers=workers, prefetch=prefetch,
                                     device_buffers=buffers, device="cuda:0",
                                     gather=gather) as loader:
                    s, nbytes = time_batches(endless(loader), args.w2_batches, args.warmup)
                path = "gather" if gather == "on" else f"{workers} workers"
                report("W2", f"pinwheel, {path}, prefetch {prefetch}", s,
                       args.w2_batches, nbytes, base)
        elif workload == "w3":
            gemms = Gemms(sizes["gemm"])
            alone = gemms.time_alone_ms(max(10, args.batches // 2))
            print(f"W3  compute alone (2 bf16 {sizes['gemm']}^2 GEMMs): {alone:.3f} ms a step",
                  flush=True)
            image_rows("W3", gemms, alone)
        else:
            print(f"unknown workload {workload!r} (w1, w2, w3)", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
