#!/usr/bin/env python3
"""Packs an ImageFolder (root/<class>/<name>.jpg, make_images' output) into
WebDataset tar shards for pinwheel.TarShards / TarShardDataset: each image
becomes <class>_<name>.jpg beside <class>_<name>.cls (the class's index in
the sorted class list, as ImageFolder labels it), dealt into SHARDS files
out/w4-000000.tar ... in a fixed shuffled order (seed 0), so every shard
holds every class.

    folder_to_shards.py ROOT OUT [--shards 16]

Prints the shards' count, total bytes and the brace pattern that names them.
Files are written under a temporary name and renamed when complete."""
import argparse
import io
import os
import random
import sys
import tarfile


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="the ImageFolder root")
    parser.add_argument("out", help="the folder to write the shards into (created)")
    parser.add_argument("--shards", type=int, default=16, help="tar files to write (>= 1)")
    args = parser.parse_args()
    if args.shards < 1:
        parser.error(f"--shards {args.shards}: must be >= 1")
    if not os.path.isdir(args.root):
        parser.error(f"{args.root}: no such folder")
    classes = sorted(d for d in os.listdir(args.root)
                     if os.path.isdir(os.path.join(args.root, d)))
    files = [(label, c, name) for label, c in enumerate(classes)
             for name in sorted(os.listdir(os.path.join(args.root, c)))
             if name.lower().endswith((".jpg", ".jpeg"))]
    if not files:
        parser.error(f"{args.root}: no <class>/*.jpg files")
    random.Random(0).shuffle(files)
    os.makedirs(args.out, exist_ok=True)
    width = 6
    total = 0
    for s in range(args.shards):
        path = os.path.join(args.out, f"w4-{s:0{width}d}.tar")
        temporary = path + ".partial"
        with tarfile.open(temporary, "w", format=tarfile.USTAR_FORMAT) as tar:
            for label, c, name in files[s::args.shards]:
                key = f"{c}_{os.path.splitext(name)[0]}"
                with open(os.path.join(args.root, c, name), "rb") as f:
                    jpeg = f.read()
                for suffix, data in (("jpg", jpeg), ("cls", str(label).encode())):
                    info = tarfile.TarInfo(f"{key}.{suffix}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        os.replace(temporary, path)
        total += os.path.getsize(path)
    last = f"{args.shards - 1:0{width}d}"
    print(f"folder_to_shards: {len(files)} images in {args.shards} shards, {total} bytes: "
          f"w4-{{{0:0{width}d}..{last}}}.tar")
    return 0


if __name__ == "__main__":
    sys.exit(main())
