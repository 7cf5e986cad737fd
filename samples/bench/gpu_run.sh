#!/usr/bin/env bash
# Runs issue #4's benchmark on the GPU machine and plots W1.
#
# Assumes the build in build-gpu/ (cmake -S . -B build-gpu -G Ninja
# -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target
# pinwheel_bench). Writes to $OUT: bench.jsonl (JSON lines), bench.txt (the
# table), w1_workers.svg (the plot). About 1–3 minutes on an H100 with 16
# cores: the token file (100 MB in /tmp) is written on the first run only.
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

start=$(date +%s)
"$BIN" --device=cuda:0 \
  --workloads=w1,w2,w3 --workers=1,2,4,8,14 --prefetch=2,4,8 \
  --batches=100 --w2_batches=5000 --warmup=5 \
  --epochs_check=100 \
  --json="$OUT/bench.jsonl" "$@" | tee "$OUT/bench.txt"
echo "benchmark: $(( $(date +%s) - start )) s"

python3 samples/bench/plot.py "$OUT/bench.jsonl" -o "$OUT/w1_workers.svg"
