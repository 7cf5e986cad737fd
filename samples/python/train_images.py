"""A small convnet trained on a JPEG image folder fed by pinwheel: the C++
workers decode, crop and flip (RandomResizedCrop + flip, no GIL), the
device stage normalises to bf16 CHW, and torch trains on what arrives.

    PYTHONPATH=build/samples/python python samples/python/train_images.py \\
        --root /tmp/shapes --epochs 3              # CPU, generates /tmp/shapes
    PYTHONPATH=build/samples/python python samples/python/train_images.py \\
        --root /tmp/w4 --size 224 --batch_size 256 --num_workers 14 \\
        --device cuda --epochs 2                   # a make_images folder, GPU

Data: --root in torchvision's ImageFolder layout (root/<class>/*.jpg).
When it does not exist it is generated first (numpy, written with
pinwheel.encode_jpeg: no PIL needed): --classes classes of
--per_class images of about 48x40..80x64 pixels, each class a colour and a
stripe direction (horizontal, vertical, diagonal, checks) under noise, so a
small convnet learns them in a few epochs. --generate_only stops there (it
needs no torch).

Model: two 3x3 conv layers (16 and 32 channels, ReLU, max pool), global
average pooling and a linear layer; SGD with momentum, cross entropy. Each
epoch prints its mean loss and the accuracy of an eval pass (train=False:
resize + center crop, no flip) over the same folder. With --device cpu the
run is deterministic (one torch thread): the same loss with any
--num_workers, since each sample's crop and flip depend only on (seed,
epoch, index). The last line is "final: loss L accuracy A".
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

# This folder holds the package's sources (pinwheel/) without the built
# extension: import the built or installed package (PYTHONPATH) instead.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
import pinwheel  # noqa: E402

COLOURS = [(200, 60, 50), (50, 170, 70), (60, 80, 200), (200, 180, 40),
           (160, 60, 170), (40, 170, 180), (130, 130, 130), (220, 120, 40)]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="the image folder (generated if missing)")
    p.add_argument("--classes", type=int, default=4, help="when generating: 1..8 classes")
    p.add_argument("--per_class", type=int, default=48, help="when generating: images a class")
    p.add_argument("--generate_only", action="store_true", help="write the folder and stop")
    p.add_argument("--size", type=int, default=32, help="the crop's side, pixels")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--num_workers", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--device", default="cpu", help='"cpu" or "cuda" (torch\'s and the loader\'s)')
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"],
                   help="what NormalizeImage delivers")
    args = p.parse_args(argv)
    if not 1 <= args.classes <= len(COLOURS):
        p.error(f"--classes {args.classes}: must be in 1..{len(COLOURS)}")
    for name in ("per_class", "size", "epochs", "batch_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name} {getattr(args, name)}: must be >= 1")
    if args.num_workers < 0:
        p.error(f"--num_workers {args.num_workers}: must be >= 0")
    return args


def generate(root: str, classes: int, per_class: int, seed: int) -> int:
    """Writes root/c<k>/<i>.jpg; returns the number of images written."""
    rng = np.random.default_rng(seed)
    tmp = root + ".partial"
    os.makedirs(tmp, exist_ok=True)
    for k in range(classes):
        os.makedirs(os.path.join(tmp, f"c{k}"), exist_ok=True)
        for i in range(per_class):
            h, w = int(rng.integers(40, 65)), int(rng.integers(48, 81))
            y, x = np.mgrid[0:h, 0:w]
            period = int(rng.integers(6, 11))
            phase = [y, x, x + y, (x // period + y // period) * period][k % 4]
            stripes = ((phase // (period // 2 or 1)) % 2).astype(np.float32)
            colour = np.array(COLOURS[k], np.float32)
            pixels = colour * (0.55 + 0.45 * stripes[..., None])
            pixels += rng.normal(0, 12, size=(h, w, 3))
            jpeg = pinwheel.encode_jpeg(np.clip(pixels, 0, 255).astype(np.uint8), quality=90)
            with open(os.path.join(tmp, f"c{k}", f"{i}.jpg"), "wb") as f:
                f.write(jpeg)
    os.replace(tmp, root)  # whole or not at all
    return classes * per_class


def main(argv=None) -> int:
    args = parse_args(argv)
    if not os.path.exists(args.root):
        n = generate(args.root, args.classes, args.per_class, args.seed)
        print(f"generated {n} JPEGs in {args.root}", flush=True)
    if args.generate_only:
        return 0

    import torch  # only now: --generate_only runs without torch
    from torch import nn

    torch.manual_seed(args.seed)
    if args.device == "cpu":
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)
    device = torch.device(args.device)
    loader_device = "cpu" if args.device == "cpu" else args.device

    normalize = pinwheel.NormalizeImage(dtype=args.dtype)
    train_data = pinwheel.ImageFolder(args.root, train=True, size=args.size)
    eval_data = pinwheel.ImageFolder(args.root, train=False, size=args.size)
    classes = len(train_data.classes)
    print(f"{len(train_data)} images of {classes} classes, crops {args.size}x{args.size}, "
          f"{args.num_workers} workers, batches of {args.batch_size} as "
          f"{args.dtype} CHW on {args.device}", flush=True)

    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, classes)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    train = pinwheel.Loader(train_data, batch_size=args.batch_size, shuffle=True,
                            seed=args.seed, num_workers=args.num_workers, drop_last=True,
                            device=loader_device, output="torch", device_transform=normalize)
    evaluate = pinwheel.Loader(eval_data, batch_size=args.batch_size,
                               num_workers=args.num_workers, device=loader_device,
                               output="torch", device_transform=normalize)
    loss_mean = accuracy = 0.0
    with train, evaluate:
        for epoch in range(args.epochs):
            start = time.perf_counter()
            model.train()
            total, steps, images = 0.0, 0, 0
            for batch in train:
                x = batch["image"].to(device).float()
                y = batch["label"].to(device)
                loss = loss_fn(model(x), y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += loss.item()
                steps += 1
                images += len(y)
            seconds = time.perf_counter() - start
            model.eval()
            right = seen = 0
            with torch.no_grad():
                for batch in evaluate:
                    x = batch["image"].to(device).float()
                    y = batch["label"].to(device)
                    right += int((model(x).argmax(1) == y).sum())
                    seen += len(y)
            loss_mean = total / max(steps, 1)
            accuracy = right / max(seen, 1)
            print(f"epoch {epoch}: loss {loss_mean:.4f}, eval accuracy {accuracy:.3f}, "
                  f"{images / seconds:.0f} img/s", flush=True)
    print(f"final: loss {loss_mean:.6f} accuracy {accuracy:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
