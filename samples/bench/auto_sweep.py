#!/usr/bin/env python3
"""Sweeps pinwheel_bench's manual configurations against num_workers /
prefetch = auto, one workload at a time, and prints a table: the best manual
configuration and its rate, auto's rate, their ratio, the batch at which auto
last changed (settled), and the pinned bytes of each (the ring's bytes for a
manual row, the most auto held for the auto row).

Issue 33's goal, on the GPU machine: auto within 5 % of the best manual
configuration on W1..W4, settled within 200 batches, with no more pinned
bytes. Each workload is one pinwheel_bench run (rows interleaved by its
--repeat rounds, so ratios hold on a noisy host); the auto row uses the same
device buffers as the manual rows (auto tunes workers and prefetch only).

Example (GPU machine, Release build):
  python3 samples/bench/auto_sweep.py --bench=build/samples/bench/pinwheel_bench \\
      --device=cuda:0 --workloads=w1,w2,w3,w4 --w4_root=/data/w4 --repeat=3
Host backend (a check that it runs; no GPU figures):
  python3 samples/bench/auto_sweep.py --bench=build-host/samples/bench/pinwheel_bench \\
      --device=host --workloads=w1,w2 --grid_workers=1,2 --repeat=1
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# Per workload: the manual grid (workers x prefetch) and the device buffers
# every row of it, auto's included, uses. Taken from the README's sweeps:
# W1 peaks at 14x2, W2 at 14x64 with 8 device buffers, W3 at 14x8, W4 at 14.
GRIDS = {
    "w1": {"workers": [2, 4, 8, 14], "prefetch": [2, 4, 8], "device_buffers": 2},
    "w2": {"workers": [4, 8, 14], "prefetch": [8, 32, 64], "device_buffers": 8},
    "w3": {"workers": [2, 4, 8, 14], "prefetch": [2, 4, 8], "device_buffers": 2},
    "w4": {"workers": [4, 8, 14], "prefetch": [2, 4, 8], "device_buffers": 2},
}


def int_list(text):
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: positive integers, comma-separated")
    return values


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", default="build/samples/bench/pinwheel_bench")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--workloads", default="w1,w2,w3,w4")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--batches", type=int, default=300,
                   help="timed batches of w1/w3 rows (auto needs room to settle)")
    p.add_argument("--w2_batches", type=int, default=5000)
    p.add_argument("--w4_batches", type=int, default=300)
    p.add_argument("--w4_root", default="")
    p.add_argument("--grid_workers", type=int_list, default=None,
                   help="override every workload's manual worker counts")
    p.add_argument("--grid_prefetch", type=int_list, default=None,
                   help="override every workload's manual prefetch depths")
    p.add_argument("--smoke", action="store_true", help="pinwheel_bench --smoke sizes")
    p.add_argument("--keep_json", default="", help="also write the JSON lines here")
    p.add_argument("bench_args", nargs="*",
                   help="after --: more pinwheel_bench flags (e.g. --w4_batch=64)")
    return p.parse_args(argv)


def run_workload(args, workload, grid, json_path):
    workers = args.grid_workers or grid["workers"]
    prefetch = args.grid_prefetch or grid["prefetch"]
    buffers = grid["device_buffers"]
    configs = [f"{w}x{p}x{buffers}" for w in workers for p in prefetch]
    configs.append(f"autoxautox{buffers}")
    command = [args.bench, f"--device={args.device}", f"--workloads={workload}",
               f"--{workload}_configs={','.join(configs)}", f"--repeat={args.repeat}",
               f"--batches={args.batches}", f"--w2_batches={args.w2_batches}",
               f"--w4_batches={args.w4_batches}", f"--json={json_path}"]
    if workload == "w4":
        command.append(f"--w4_root={args.w4_root}")
    if args.smoke:
        command.append("--smoke")
    command += args.bench_args
    print("$", " ".join(command), flush=True)
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Every change the tuner logged, each repetition's (the last three alone
    # hid how the 2 x H200 run of 2026-11-27 got where it did).
    auto_lines = [l for l in result.stdout.splitlines() if "auto-tune:" in l]
    for line in auto_lines:
        print("   ", line)
    if result.returncode != 0:
        print(result.stdout[-3000:])
        raise SystemExit(f"{workload}: pinwheel_bench exited {result.returncode}")


def summarize(json_path):
    """Returns {workload: {"batch_size": n, "rows": {label: [rep, ...]}}}."""
    out = {}
    with open(json_path) as f:
        for line in f:
            o = json.loads(line)
            if o.get("kind") == "workload":
                out.setdefault(o["workload"], {"rows": {}})["batch_size"] = o.get("batch_size", 0)
            if o.get("kind") != "rep" or o.get("method") != "pinwheel" or o.get("skipped"):
                continue
            w = out.setdefault(o["workload"], {"rows": {}})
            w["rows"].setdefault(o["label"], []).append(o)
    return out


def median(reps, key):
    return statistics.median(r[key] for r in reps)


def table(results):
    header = ("workload", "best manual", "its samples/s", "auto samples/s", "auto/best",
              "manual configs: worst/best, within 5 %, below auto", "auto settled at batch",
              "auto reached", "pinned best", "pinned auto (peak)")
    rows = []
    for workload, w in results.items():
        batch = w.get("batch_size") or 0
        manual = {k: v for k, v in w["rows"].items() if "auto" not in k}
        auto = {k: v for k, v in w["rows"].items() if "auto" in k}
        if not manual or not auto:
            rows.append((workload, "-", "-", "-", "-", "-", "-", "-", "-", "skipped or failed"))
            continue
        best_label, best = max(manual.items(), key=lambda kv: median(kv[1], "batches_per_s"))
        auto_reps = next(iter(auto.values()))
        best_rate = median(best, "batches_per_s") * batch
        auto_rate = median(auto_reps, "batches_per_s") * batch
        # The best of many configurations' medians is itself biased upwards
        # when several are tied within the noise: say how many were.
        rates = sorted(median(reps, "batches_per_s") * batch for reps in manual.values())
        tied = sum(r >= 0.95 * best_rate for r in rates)
        below = sum(r < auto_rate for r in rates)
        spread = (f"{rates[0] / best_rate:.2f}, {tied} of {len(rates)}, {below} of {len(rates)}"
                  if best_rate > 0 else "-")
        reached = sorted({f"{r['auto_workers']}x{r['auto_prefetch']}" for r in auto_reps})
        rows.append((
            workload, best_label.replace("pinwheel ", ""), f"{best_rate:,.0f}", f"{auto_rate:,.0f}",
            f"{auto_rate / best_rate:.3f}" if best_rate > 0 else "-", spread,
            f"{median(auto_reps, 'auto_settled_batch'):.0f} (max {max(r['auto_settled_batch'] for r in auto_reps)})",
            ",".join(reached),
            f"{median(best, 'pinned_bytes'):,.0f}",
            f"{max(r['pinned_bytes_peak'] for r in auto_reps):,}"))
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)))


def main(argv):
    args = parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    for w in workloads:
        if w not in GRIDS:
            raise SystemExit(f"--workloads: unknown workload {w!r} (w1, w2, w3 or w4)")
    if "w4" in workloads and not args.w4_root:
        raise SystemExit("--workloads has w4 but --w4_root is empty (make_images --out=DIR writes one)")
    with tempfile.TemporaryDirectory() as tmp:
        json_path = os.path.join(tmp, "sweep.jsonl")
        with open(json_path, "w") as sweep:
            for w in workloads:
                one = os.path.join(tmp, f"{w}.jsonl")
                run_workload(args, w, GRIDS[w], one)
                with open(one) as f:
                    sweep.write(f.read())
        if args.keep_json:
            with open(json_path) as src, open(args.keep_json, "w") as dst:
                dst.write(src.read())
        print()
        table(summarize(json_path))


if __name__ == "__main__":
    main(sys.argv[1:])
