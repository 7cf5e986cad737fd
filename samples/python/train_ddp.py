"""Data-parallel training on a JPEG folder, one loader per rank, under
torchrun: how fast each way of feeding the model trains it (issue 30).

    # one GPU, then two, pinwheel decoding on the CPU workers
    PYTHONPATH=build/samples/python torchrun --standalone --nproc_per_node=1 \\
        samples/python/train_ddp.py --root /tmp/w4 --loader pinwheel-cpu
    PYTHONPATH=build/samples/python torchrun --standalone --nproc_per_node=2 \\
        samples/python/train_ddp.py --root /tmp/w4 --loader pinwheel-cpu

Loaders (--loader), each reading the same files with RandomResizedCrop +
horizontal flip, ending as normalised bf16 [batch, 3, size, size] on the
device:
  pinwheel-cpu  pinwheel.ImageFolder(decode="cpu"): the C++ workers decode,
                crop and flip; NormalizeImage on the device stage
  pinwheel-gpu  pinwheel.ImageFolder(decode="gpu"): nvJPEG decodes, crops
                and normalises on the GPU (needs CUDA and a build with it)
  dataloader    torch's DataLoader(pin_memory=True) over the same files,
                torchvision.io.decode_jpeg + transforms.v2 in --workers
                worker processes, a DistributedSampler; normalised on the
                device
  synthetic     one batch made once on the device, used every step: the
                model's own ceiling (no data loading at all)

Each pinwheel loader is one per rank (distributed="launcher": this rank's
share of every epoch, the device of LOCAL_RANK). Model (--model): resnet50
(torchvision, the real job), resnet18, or tiny (two conv layers, no
torchvision: what CI runs on the host backend). bf16 autocast,
channels_last, SGD with momentum, DistributedDataParallel (NCCL on GPUs,
gloo on the CPU) whenever the launcher set WORLD_SIZE.

It runs --warmup steps, then times --steps steps at the same per-rank batch
(epochs follow one another as needed). Each rank prints one line:

  rank R/W: <loader> <model> batch B: N images/s, waited for data X %,
      cores used C (CPU s / wall s)

"waited for data" is the share of the timed wall time spent getting the
next batch (the loader's next(), and for the DataLoader its copy to the
device); "cores used" is the CPU time of this process and its children (the
DataLoader's workers) over the wall time. Rank 0 then prints the job's
total (every rank's images over the slowest rank's time) and, last, one
JSON line (kind "train_ddp") that --json FILE also appends to.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import sys
import threading
import time

# This folder holds the package's sources (pinwheel/) without the built
# extension: import the built or installed package (PYTHONPATH) instead.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

LOADERS = ("pinwheel-cpu", "pinwheel-gpu", "dataloader", "synthetic")
MODELS = ("resnet50", "resnet18", "tiny")
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class SetupError(Exception):
    """A run that cannot start as asked; the message says why and what to do."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", help="the JPEG folder, root/<class>/*.jpg (not needed "
                   "for --loader synthetic)")
    p.add_argument("--loader", required=True, choices=LOADERS)
    p.add_argument("--model", default="resnet50", choices=MODELS)
    p.add_argument("--size", type=int, default=224, help="the crop's side, pixels")
    p.add_argument("--batch_size", type=int, default=256, help="per rank")
    p.add_argument("--workers", type=int, default=8,
                   help="loader workers per rank (threads for pinwheel, processes for "
                   "the DataLoader)")
    p.add_argument("--prefetch", type=int, default=4, help="pinwheel's pinned slots")
    p.add_argument("--worker_nice", type=int, default=0,
                   help="raise each loader worker's nice value by this much (0..19; "
                   "pinwheel's worker threads and the DataLoader's processes alike), "
                   "so the training threads win a contended CPU")
    p.add_argument("--steps", type=int, default=60, help="timed steps")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    p.add_argument("--classes", type=int, default=0,
                   help="model outputs; 0: the folder's class count (1000 for synthetic)")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--json", help="append rank 0's JSON line to this file")
    args = p.parse_args(argv)
    for name in ("size", "batch_size", "steps", "prefetch"):
        if getattr(args, name) < 1:
            p.error(f"--{name} {getattr(args, name)}: must be >= 1")
    if not 0 <= args.worker_nice <= 19:
        p.error(f"--worker_nice {args.worker_nice}: must be 0..19")
    for name in ("warmup", "workers", "classes"):
        if getattr(args, name) < 0:
            p.error(f"--{name} {getattr(args, name)}: must be >= 0")
    if args.loader != "synthetic" and not args.root:
        p.error(f"--loader {args.loader} needs --root (a JPEG folder, e.g. one "
                f"samples/bench/make_images writes)")
    if args.root and args.loader != "synthetic" and not os.path.isdir(args.root):
        p.error(f"--root {args.root}: no such folder (samples/bench/make_images "
                f"--out={args.root} --count=10000 makes one)")
    # Checked before torch is imported (seconds), so a wrong run stops at once.
    if args.loader == "pinwheel-gpu" and args.device != "cuda":
        p.error("--loader pinwheel-gpu decodes with nvJPEG: it needs --device cuda")
    if args.loader == "dataloader" and importlib.util.find_spec("torchvision") is None:
        p.error("--loader dataloader needs torchvision (decode_jpeg, transforms.v2), "
                "which is not installed")
    if args.model != "tiny" and importlib.util.find_spec("torchvision") is None:
        p.error(f"--model {args.model} needs torchvision, which is not installed "
                f"(--model tiny does not)")
    return args


def process_tree_cpu_seconds() -> float:
    """User + system CPU seconds of this process and every live descendant
    (the DataLoader's worker processes), from /proc; children already reaped
    count through getrusage. This process's own share comes from
    time.process_time(), exact to the nanosecond: os.times() counts in clock
    ticks (10 ms), and a short run on a busy machine read 0 there."""
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = time.process_time() + reaped.ru_utime + reaped.ru_stime
    if not os.path.isdir("/proc"):
        return total
    tick = os.sysconf("SC_CLK_TCK")
    parents, stats = {}, {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents[int(pid)] = int(fields[1])
        stats[int(pid)] = (int(fields[11]) + int(fields[12])) / tick
    me = os.getpid()
    for pid in stats:
        p = parents.get(pid)
        while p and p != me and p in parents:
            p = parents[p]
        if p == me and pid != me:
            total += stats[pid]
    return total


def folder_files(root):
    """(path, label) of every .jpg/.jpeg under root/<class>/, classes sorted
    by name: torchvision's ImageFolder order, as pinwheel.ImageFolder's."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    files = []
    for label, c in enumerate(classes):
        for dirpath, _, names in sorted(os.walk(os.path.join(root, c))):
            for n in sorted(names):
                if n.lower().endswith((".jpg", ".jpeg")):
                    files.append((os.path.join(dirpath, n), label))
    if not files:
        raise SetupError(f"--root {root}: no .jpg files in class folders")
    return classes, files


def make_model(name, classes, torch):
    from torch import nn
    if name == "tiny":
        return nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes))
    import torchvision
    return getattr(torchvision.models, name)(num_classes=classes)


def nicer(increment):
    """A worker_init that raises the calling thread's nice value (Linux: a
    thread's own; elsewhere the process's), or None for 0."""
    if increment == 0:
        return None
    # From the creating thread's value: a worker_init may run more than once
    # on one thread (each epoch), and must not add up.
    nice = min(19, os.getpriority(os.PRIO_PROCESS, 0) + increment)

    def init(_worker):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    return init


def pinwheel_batches(args, device, torch):
    """Endless (images, labels) from one pinwheel loader of this rank."""
    import pinwheel
    decode = args.loader.split("-")[1]
    data = pinwheel.ImageFolder(args.root, train=True, size=args.size, decode=decode)
    loader = pinwheel.Loader(
        data, batch_size=args.batch_size, shuffle=True, seed=args.seed, drop_last=True,
        num_workers=args.workers, prefetch=args.prefetch, distributed="launcher",
        device="cpu" if device.type == "cpu" else f"cuda:{device.index}", output="torch",
        worker_init=nicer(args.worker_nice))
    if len(loader) == 0:
        raise SetupError(f"--root {args.root}: {len(data)} images are less than one batch "
                         f"of {args.batch_size} per rank")

    def batches():
        while True:
            for batch in loader:
                yield batch["image"], batch["label"]
    return len(data.classes), batches(), loader


def dataloader_batches(args, device, torch, rank, world):
    """Endless (images, labels): torch's DataLoader over the same files."""
    import torchvision
    from torchvision.transforms import v2
    classes, files = folder_files(args.root)
    crop = v2.Compose([v2.RandomResizedCrop(args.size, antialias=True),
                       v2.RandomHorizontalFlip()])

    class Files(torch.utils.data.Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            path, label = files[i]
            image = torchvision.io.decode_jpeg(torchvision.io.read_file(path),
                                               mode=torchvision.io.ImageReadMode.RGB)
            return crop(image), label

    dataset = Files()
    sampler = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=world, rank=rank, shuffle=True, seed=args.seed, drop_last=True)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
        pin_memory=device.type == "cuda", drop_last=True,
        persistent_workers=args.workers > 0, worker_init_fn=nicer(args.worker_nice))
    if len(loader) == 0:
        raise SetupError(f"--root {args.root}: {len(files)} images are less than one batch "
                         f"of {args.batch_size} on each of {world} ranks")
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1) * 255

    def batches():
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            for images, labels in loader:
                images = images.to(device, non_blocking=True)
                labels = labels.to(device, non_blocking=True)
                yield ((images.float() - mean) / std).to(torch.bfloat16), labels
            epoch += 1
    return len(classes), batches(), None


def synthetic_batches(args, device, torch):
    classes = args.classes or 1000
    g = torch.Generator(device="cpu").manual_seed(args.seed)
    images = torch.randn(args.batch_size, 3, args.size, args.size, generator=g)
    labels = torch.randint(0, classes, (args.batch_size,), generator=g)
    images = images.to(device=device, dtype=torch.bfloat16)
    labels = labels.to(device)

    def batches():
        while True:
            yield images, labels
    return classes, batches(), None


def main(argv=None) -> int:
    args = parse_args(argv)
    # What `import pinwheel` does, here before torch's first CUDA call and for
    # every --loader alike: CUDA's 32 hardware queues instead of 8 (Note
    # [hardware queues] in transfer/jpeg/nvjpeg_decoder.h). A value you set
    # stays.
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SetupError("--device cuda but torch sees no GPU (use --device cpu)")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    else:
        device = torch.device("cpu")
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                device_id=device if device.type == "cuda" else None)
    torch.manual_seed(args.seed)

    if args.loader == "synthetic":
        classes, batches, loader = synthetic_batches(args, device, torch)
    elif args.loader == "dataloader":
        classes, batches, loader = dataloader_batches(args, device, torch, rank, world)
    else:
        classes, batches, loader = pinwheel_batches(args, device, torch)
    classes = args.classes or classes
    model = make_model(args.model, classes, torch).to(device, memory_format=torch.channels_last)
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    waited = 0.0
    loss = None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:  # the timed steps start here
            sync()
            if distributed:
                dist.barrier()
            start, cpu_start, waited = time.perf_counter(), process_tree_cpu_seconds(), 0.0
        t = time.perf_counter()
        images, labels = next(batches)
        waited += time.perf_counter() - t
        images = images.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = loss_fn(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    sync()
    wall = time.perf_counter() - start
    cpu = process_tree_cpu_seconds() - cpu_start
    final_loss = float(loss.item())
    slowest_rank = None
    if distributed and args.loader.startswith("pinwheel"):
        # Which rank's loader holds the job back, and why (issue 33): every
        # rank's wait record, all-gathered (collective: every rank calls it).
        import pinwheel.distributed
        slowest_rank = pinwheel.distributed.slowest_rank(loader)
    if loader is not None:
        loader.close()
    if final_loss != final_loss or final_loss in (float("inf"), float("-inf")):
        raise SetupError(f"rank {rank}: the loss is {final_loss} after {args.steps} steps: "
                         f"the model diverged (try a lower --lr)")
    mine = {"rank": rank, "images_per_s": args.steps * args.batch_size / wall,
            "waited_percent": 100.0 * waited / wall, "cores": cpu / wall,
            "cpu_seconds": cpu, "wall_seconds": wall, "loss": final_loss}
    # One write a line: the ranks share the launcher's stdout, and a line
    # written in one piece (under PIPE_BUF bytes) is never cut by another's.
    sys.stdout.write(f"rank {rank}/{world}: {args.loader} {args.model} batch {args.batch_size}: "
                     f"{mine['images_per_s']:.0f} images/s, waited for data "
                     f"{mine['waited_percent']:.1f} %, cores used {mine['cores']:.2f} "
                     f"({cpu:.1f} CPU s / {wall:.2f} s), loss {final_loss:.3f}\n")
    sys.stdout.flush()
    ranks = [mine]
    if distributed:
        ranks = [None] * world
        dist.all_gather_object(ranks, mine)
    if rank == 0:
        slowest = max(r["wall_seconds"] for r in ranks)
        total = world * args.steps * args.batch_size / slowest
        summary = {
            "kind": "train_ddp", "loader": args.loader, "model": args.model,
            "device": device.type, "world_size": world, "batch_per_rank": args.batch_size,
            "size": args.size, "workers": args.workers, "worker_nice": args.worker_nice,
            "steps": args.steps, "warmup": args.warmup, "images_per_s": total,
            "images_per_s_per_rank": total / world,
            "waited_percent_max": max(r["waited_percent"] for r in ranks),
            "cores": sum(r["cores"] for r in ranks), "ranks": ranks}
        print(f"all {world} rank(s): {args.loader} {args.model} batch {args.batch_size} a "
              f"rank: {total:.0f} images/s ({total / world:.0f} a rank), waited for data "
              f"at most {summary['waited_percent_max']:.1f} %, cores used "
              f"{summary['cores']:.2f}", flush=True)
        if slowest_rank is not None:
            summary["slowest_rank"] = slowest_rank.rank
            print(f"loader: {slowest_rank.line}", flush=True)
        line = json.dumps(summary)
        print(line, flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(line + "\n")
    if distributed:
        dist.destroy_process_group()
        global _LEFT_A_PROCESS_GROUP
        _LEFT_A_PROCESS_GROUP = True
    return 0


# Set once a rank has left its process group. On this project's 2-core host
# (torch 2.x, gloo), a rank that had finished and destroyed its group still
# aborted now and then while the interpreter shut down ("terminate called
# without an active exception", no Python frame left): 4 of 14 two-rank runs
# with --loader synthetic, which never imports pinwheel, so it is torch's
# teardown, not the loader's. Such a rank leaves with os._exit once its
# output is flushed and its files closed, so that the launcher sees the run
# it made.
_LEFT_A_PROCESS_GROUP = False


if __name__ == "__main__":
    try:
        code = main()
    except SetupError as e:
        print(f"train_ddp.py: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
    if _LEFT_A_PROCESS_GROUP:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
