#!/usr/bin/env python3
"""The CPU path's pixels against torchvision's on the same crops (issue 32).

pinwheel's training sample (DecodeTransformedImage: the crop decoded at a
reduced DCT scale when the crop allows, resized by the fixed-point
antialiased resize, flipped) is compared with torchvision's pipeline on the
same crop box and flip: decode_jpeg (full size, RGB), then
transforms.v2.functional.resized_crop(top, left, height, width, [size, size],
antialias=True) and horizontal_flip. decode_crops (samples/bench) writes
pinwheel's outputs and boxes; this script does torchvision's and prints the
max and mean absolute difference on 0..255, overall and per DCT scale.

Tolerance held, on 0..255 (measured numbers in samples/bench/README.md):
  - samples decoded at full size (DCT scale 1/1): max abs diff <= 2 and
    mean <= 0.5 (--full_max, --full_mean). Only the rounding differs: the
    same filter on the same box, rounded once here (fixed point with 7
    bits kept between the passes) and after each pass in torch's uint8
    path.
  - samples decoded at a reduced DCT scale (a crop of at least 448 pixels
    a side decodes at 1/2, 896 at 1/4, ...): each sample's mean <= 4.0 and
    max <= 64 (--scaled_mean, --scaled_max). libjpeg's scaled IDCT keeps
    the lowest 4x4 (2x2, ...) of each block's frequencies, a sharper
    low-pass than the triangle filter over a full decode, so the two part
    at fine texture and sharp edges; this is the price of not decoding
    4x (16x, ...) the pixels.
  - over all samples, mean <= 1.0 (--all_mean).

Without --root it writes its own JPEGs (torchvision.io.encode_jpeg; 4:2:0,
quality 90, textured like make_images'): sizes from 150x100 to 1900x1500 so
that every scale rule is exercised (1/1, 1/2, 1/4, 1/8), one grayscale.
Exits 77 (skipped) when torch or torchvision does not import.

  python3 samples/bench/resize_vs_torchvision.py \\
      --decode_crops build/samples/bench/decode_crops [--root /tmp/w4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

SKIP = 77


def write_images(root: str, torch, encode_jpeg) -> None:
    """JPEGs of many sizes under root/c0 (one grayscale): smooth gradients
    plus fine texture, as make_images' content."""
    gen = torch.Generator().manual_seed(7)
    sizes = [(150, 100), (300, 200), (463, 422), (500, 375), (375, 500),
             (640, 480), (900, 700), (1000, 1000), (1300, 900), (1900, 1500),
             (1600, 1900), (800, 600)]
    os.makedirs(os.path.join(root, "c0"), exist_ok=True)
    for k, (w, h) in enumerate(sizes * 4):
        y = torch.linspace(0, 1, h).view(h, 1)
        x = torch.linspace(0, 1, w).view(1, w)
        phase = torch.rand(3, generator=gen) * 6.28
        base = torch.stack([
            0.5 + 0.5 * torch.sin(6 * x + 4 * y + phase[c]) for c in range(3)])
        noise = torch.rand(3, h, w, generator=gen) * 0.35
        image = ((base * 0.65 + noise) * 255).clamp(0, 255).to(torch.uint8)
        if k == 5:
            image = image[:1]  # grayscale
        path = os.path.join(root, "c0", f"{k:03d}.jpg")
        with open(path, "wb") as f:
            f.write(encode_jpeg(image, quality=90).numpy().tobytes())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--decode_crops", required=True,
                   help="the decode_crops binary (samples/bench)")
    p.add_argument("--root", help="an ImageFolder root; default: own JPEGs")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--seeds", type=int, default=2,
                   help="passes with different crop seeds")
    p.add_argument("--full_max", type=int, default=2)
    p.add_argument("--full_mean", type=float, default=0.5)
    p.add_argument("--scaled_max", type=int, default=64)
    p.add_argument("--scaled_mean", type=float, default=4.0)
    p.add_argument("--all_mean", type=float, default=1.0)
    args = p.parse_args()
    try:
        import numpy as np
        import torch
        from torchvision.io import ImageReadMode, decode_jpeg, encode_jpeg
        from torchvision.transforms.v2 import functional as F
    except ImportError as e:
        print(f"resize_vs_torchvision: skipped: {e}")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        root = args.root
        if root is None:
            root = os.path.join(tmp, "images")
            write_images(root, torch, encode_jpeg)
        per_scale: dict[str, list[tuple[int, float, int]]] = {}
        worst_sample_mean = 0.0
        for seed in range(1, args.seeds + 1):
            prefix = os.path.join(tmp, f"crops{seed}")
            subprocess.run([args.decode_crops, f"--root={root}",
                            f"--out={prefix}", f"--size={args.size}",
                            f"--seed={seed}", f"--limit={args.limit}"],
                           check=True)
            ours = np.fromfile(prefix + ".rgb", dtype=np.uint8).reshape(
                -1, args.size, args.size, 3)
            with open(prefix + ".txt") as f:
                lines = f.read().splitlines()
            assert len(lines) == ours.shape[0], (len(lines), ours.shape)
            for k, line in enumerate(lines):
                x, y, w, h, flip, scale, path = line.split(" ", 6)
                with open(path, "rb") as jf:
                    data = torch.frombuffer(bytearray(jf.read()),
                                            dtype=torch.uint8)
                image = decode_jpeg(data, mode=ImageReadMode.RGB)
                # pinwheel's crops are whole pixels (RandomResizedCrop).
                theirs = F.resized_crop(image, int(float(y)), int(float(x)),
                                        int(float(h)), int(float(w)),
                                        [args.size, args.size],
                                        antialias=True)
                if flip == "1":
                    theirs = F.horizontal_flip(theirs)
                theirs = theirs.permute(1, 2, 0).numpy()
                diff = np.abs(ours[k].astype(np.int16) - theirs.astype(np.int16))
                per_scale.setdefault(scale, []).append(
                    (int(diff.max()), float(diff.mean()), diff.size))
                worst_sample_mean = max(worst_sample_mean, float(diff.mean()))
    total = sum(n for v in per_scale.values() for _, _, n in v)
    mean = sum(m * n for v in per_scale.values() for _, m, n in v) / total
    samples = sum(len(v) for v in per_scale.values())
    print(f"resize_vs_torchvision: {samples} samples of {args.size}x"
          f"{args.size}; |pinwheel - torchvision| on 0..255:")
    failures = []
    for scale in sorted(per_scale, key=lambda s: eval(s), reverse=True):
        v = per_scale[scale]
        n = sum(c for _, _, c in v)
        worst = max(mx for mx, _, _ in v)
        worst_mean = max(m for _, m, _ in v)
        print(f"  DCT scale {scale:>4}: {len(v):4d} samples, max {worst:3d}, "
              f"mean {sum(m * c for _, m, c in v) / n:.3f}, worst sample's "
              f"mean {worst_mean:.3f}")
        limit_max, limit_mean = ((args.full_max, args.full_mean)
                                 if scale == "1/1" else
                                 (args.scaled_max, args.scaled_mean))
        if worst > limit_max or worst_mean > limit_mean:
            failures.append(f"scale {scale}: max {worst} (held <= {limit_max}),"
                            f" a sample's mean {worst_mean:.3f} (held <= "
                            f"{limit_mean})")
    print(f"  all: mean {mean:.3f} (held <= {args.all_mean})")
    if mean > args.all_mean:
        failures.append(f"all: mean {mean:.3f} (held <= {args.all_mean})")
    for f in failures:
        print(f"resize_vs_torchvision: FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
