#!/usr/bin/env bash
# Runs issue #4's benchmark on the GPU machine and plots W1.
#
# Assumes the build in build-gpu/ (cmake -S . -B build-gpu -G Ninja
# -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target
# pinwheel_bench). Writes to $OUT: bench.jsonl (JSON lines), bench.txt (the
# table), w1_workers.svg (the plot). Expected 1–2 minutes on an H100 with
# 16 cores (stopped at 300 s); the token file (100 MB in /tmp) is written on
# the first run only.
#
# Then the multi-loader benchmark (pinwheel_multi_bench) into multi_bench.txt.
#
# Usage: OUT=/some/dir samples/bench/gpu_run.sh [extra pinwheel_bench flags]
set -euo pipefail

cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the folder for bench.jsonl, bench.txt and w1_workers.svg}"
BIN=${BIN:-build-gpu/samples/bench/pinwheel_bench}
mkdir -p "$OUT"

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,clocks.max.sm \
    --format=csv | tee "$OUT/gpu.txt"
fi
nproc | sed 's/^/host cores: /'

# 200 timed batches a W1/W3 row: batches already copied before the clock
# starts (at most --device_buffers) then bias GB/s by <= 1%.
start=$(date +%s)
status=0
timeout 300 "$BIN" --device=cuda:0 \
  --workloads=w1,w2,w3 --workers=1,2,4,8,14 --prefetch=2,4,8 \
  --batches=200 --w2_batches=5000 --warmup=5 \
  --epochs_check=100 \
  --json="$OUT/bench.jsonl" "$@" | tee "$OUT/bench.txt" || status=$?
echo "benchmark: $(( $(date +%s) - start )) s, exit status $status"
if [ "$status" -eq 124 ]; then
  echo "benchmark stopped after 300 s: bench.jsonl holds the rows measured so far"
fi

# Plots whatever rows were written, even after a failure.
if [ -s "$OUT/bench.jsonl" ]; then
  python3 samples/bench/plot.py "$OUT/bench.jsonl" -o "$OUT/w1_workers.svg"
fi
# N loaders at once (issue 11): a loader per GPU in one process, then (with
# mpirun and >= 2 GPUs) one process per GPU; each beside the raw pinned copy
# of all GPUs at once, measured in the same run.
MULTI=${MULTI:-build-gpu/samples/bench/pinwheel_multi_bench}
if [ -x "$MULTI" ]; then
  timeout 300 "$MULTI" 2>&1 | tee "$OUT/multi_bench.txt" || status=1
  gpus=$(nvidia-smi -L 2>/dev/null | wc -l || true)
  if [ "$gpus" -ge 2 ] && command -v mpirun >/dev/null; then
    timeout 300 mpirun --allow-run-as-root -np "$gpus" "$MULTI" 2>&1 |
      tee -a "$OUT/multi_bench.txt" || status=1
  fi
fi
exit "$status"
