#!/usr/bin/env python3
"""W4, decode-bound images: torchvision's DataLoader against pinwheel.

The image set is an ImageNet-like folder of JPEGs (root/<class>/<file>.jpg)
written by samples/bench's make_images. Each row delivers batches
of 256 RandomResizedCrop(224) + horizontal flip samples, normalised to bf16
CHW on the GPU, and is timed after warm-up batches between two
torch.cuda.synchronize() over whole epochs (after a warm-up epoch):

  torchvision  DataLoader over torchvision.io.decode_jpeg + v2
               RandomResizedCrop(224, antialias) + RandomHorizontalFlip,
               pin_memory=True, .to("cuda", non_blocking=True), then the
               normalisation on the GPU
  pinwheel     pinwheel.ImageFolder(root, train=True, size=224) at the
               same worker counts, normalised to bf16 CHW on pinwheel's
               device stage (Loader(device_transform=
               pinwheel.NormalizeImage(mean, std, dtype="bf16")))

The pinwheel C++ row is pinwheel_bench's W4, run separately on the same
folder (one process per loader is what the issue compares):

  build/samples/bench/pinwheel_bench --device=cuda:0 --workloads=w4 \
      --w4_root=/data/w4 --w4_workers=8,14 --repeat=3

For each row: img/s, the CPU cores the process and its workers used (CPU
seconds over wall seconds), img/s per core; median and [min-max] over
--repeats runs. With --json, one object a line.

  python3 samples/python/bench_images.py --root /data/w4 --workers 8 14
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.utils.data as tud

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def list_images(root: str) -> tuple[list[str], list[int]]:
    classes = sorted(d for d in os.listdir(root)
                     if os.path.isdir(os.path.join(root, d)))
    if not classes:
        raise ValueError(f"--root {root!r} holds no class folders")
    paths, labels = [], []
    for label, name in enumerate(classes):
        folder = os.path.join(root, name)
        for f in sorted(os.listdir(folder)):
            if f.lower().endswith((".jpg", ".jpeg")):
                paths.append(os.path.join(folder, f))
                labels.append(label)
    return paths, labels


class TorchvisionImages(tud.Dataset):
    """decode_jpeg + v2 RandomResizedCrop(224) + flip, u8 CHW."""

    def __init__(self, paths, labels, size):
        from torchvision.transforms import v2
        self.paths, self.labels = paths, labels
        self.transform = v2.Compose([
            v2.RandomResizedCrop(size, antialias=True),
            v2.RandomHorizontalFlip(),
        ])

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        from torchvision.io import ImageReadMode, decode_jpeg, read_file
        image = decode_jpeg(read_file(self.paths[i]), mode=ImageReadMode.RGB)
        return self.transform(image), self.labels[i]


def cpu_seconds() -> float:
    """CPU seconds of this process and its live and reaped children."""
    import psutil
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            pass
    t = os.times()
    return total + t.children_user + t.children_system


def normalise(images_u8: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(MEAN, device=images_u8.device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=images_u8.device).view(1, 3, 1, 1)
    return ((images_u8.float() / 255 - mean) / std).to(torch.bfloat16)


def time_epochs(loader, epochs: int, per_batch):
    """Runs `epochs` whole epochs of `loader`; returns (images, s, cpu s).

    Whole epochs, timed from the start of the first: a loader's prefetch
    queue (DataLoader holds 2 x workers batches, a quarter of an epoch of
    10,000 images at 14 workers) cannot flatter a short timed window, and
    each epoch's refill is part of the cost."""
    torch.cuda.synchronize()
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    images = 0
    for _ in range(epochs):
        for batch in loader:
            images += per_batch(batch)
    torch.cuda.synchronize()
    return images, time.perf_counter() - t0, cpu_seconds() - cpu0


def torchvision_row(paths, labels, workers, args):
    ds = TorchvisionImages(paths, labels, args.size)
    loader = tud.DataLoader(ds, batch_size=args.batch, shuffle=True,
                            num_workers=workers, pin_memory=True,
                            drop_last=True, persistent_workers=True)

    def per_batch(batch):
        x, _ = batch
        out = normalise(x.to("cuda", non_blocking=True))
        del out
        return x.shape[0]

    time_epochs(loader, 1, per_batch)  # warm-up: workers started, caches
    results = [time_epochs(loader, args.epochs, per_batch)
               for _ in range(args.repeats)]
    del loader
    return results


def pinwheel_row(workers, args):
    import pinwheel
    if not hasattr(pinwheel, "ImageFolder"):
        return None
    # NormalizeImage takes the input's 0..255 units: torchvision's 0..1
    # mean and std times 255 (pinwheel.IMAGENET_MEAN / IMAGENET_STD).
    normalize = pinwheel.NormalizeImage(mean=[m * 255 for m in MEAN],
                                        std=[s * 255 for s in STD],
                                        dtype="bf16")
    loader = pinwheel.Loader(
        pinwheel.ImageFolder(args.root, train=True, size=args.size),
        batch_size=args.batch, shuffle=True, num_workers=workers,
        device="cuda", drop_last=True, device_transform=normalize)

    def per_batch(batch):
        return batch["image"].shape[0]

    time_epochs(loader, 1, per_batch)
    results = [time_epochs(loader, args.epochs, per_batch)
               for _ in range(args.repeats)]
    loader.close()
    return results


def summarise(name, workers, results):
    rates = [n / s for n, s, _ in results]
    cores = [c / s for _, s, c in results]
    per_core = [r / c if c > 0 else float("nan") for r, c in zip(rates, cores)]
    return {
        "workload": "w4", "row": name, "workers": workers,
        "img_per_s": statistics.median(rates),
        "img_per_s_min": min(rates), "img_per_s_max": max(rates),
        "cores": statistics.median(cores),
        "img_per_s_per_core": statistics.median(per_core),
        "repeats": len(results),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True,
                   help="image folder written by make_images")
    p.add_argument("--workers", type=int, nargs="+", default=[8, 14])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--epochs", type=int, default=2,
                   help="whole epochs a repetition times (after one warm-up "
                        "epoch)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rows", nargs="+", default=["torchvision", "pinwheel"],
                   choices=["torchvision", "pinwheel"])
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("bench_images: needs a CUDA GPU (W4 delivers on the device)")
        return 2
    paths, labels = list_images(args.root)
    rows = []
    for workers in args.workers:
        if "torchvision" in args.rows:
            rows.append(summarise("torchvision DataLoader", workers,
                                  torchvision_row(paths, labels, workers,
                                                  args)))
        if "pinwheel" in args.rows:
            results = pinwheel_row(workers, args)
            if results is None:
                print("bench_images: this pinwheel has no ImageFolder; "
                      "pinwheel rows skipped")
            else:
                rows.append(summarise("pinwheel (Python)", workers, results))
    print(f"W4: {len(paths)} JPEGs, batch {args.batch} of "
          f"RandomResizedCrop({args.size}) + flip, bf16 on "
          f"{torch.cuda.get_device_name()}; median [min-max] of "
          f"{args.repeats}")
    for r in rows:
        print(f"  {r['row']:<24} {r['workers']:>2} workers  "
              f"{r['img_per_s']:8.0f} img/s [{r['img_per_s_min']:.0f}-"
              f"{r['img_per_s_max']:.0f}]  {r['cores']:5.1f} cores  "
              f"{r['img_per_s_per_core']:6.0f} img/s/core")
        if args.json:
            print(json.dumps(r))
    print("  pinwheel (C++): pinwheel_bench --workloads=w4 --w4_root="
          f"{args.root} --w4_workers={','.join(map(str, args.workers))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
