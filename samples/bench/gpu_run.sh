#!/usr/bin/env bash
# Runs issues #4 and #12's benchmark on the GPU machine and plots W1.
#
# Assumes the build in build-gpu/ (cmake -S . -B build-gpu -G Ninja
# -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu --target
# pinwheel_bench pinwheel_multi_bench copy_limits; copy_limits is in
# build-gpu/samples/bench/probes/). Expected about 6 minutes
# on an H100 with 16 cores (each step is stopped at its own limit; the whole
# script at most 16 minutes); the token file (100 MB in /tmp) is written on the first
# run only. Writes to $OUT:
#   bench.txt, bench.jsonl   the main run: w1, w2, w2w, w3, every row 5 times
#                            in rounds interleaved with the raw copy (w3: with
#                            the compute alone; w2w: with its own raw copy and
#                            w2's); about 2.5 minutes
#   nt_threshold.txt/.jsonl  w1 again with glibc's non-temporal threshold
#                            lowered (see below); about 20 s
#   quick.txt, quick.jsonl   pinwheel_bench --quick, what users run to size
#                            their machine (two w2w rows included); about
#                            25-35 s
#   multi_bench.txt          pinwheel_multi_bench (issue 11)
#   copy_limits.txt          what the machine allows any loader, measured
#                            without pinwheel (DMA from hot and cold buffers
#                            and under memory load, the fills alone, the
#                            smallest fill+copy pipeline) beside pinwheel
#                            rows over the same fills; about 2 minutes
#   w1_workers.svg           the plot of the main run's W1 rows
#   gpu.txt                  nvidia-smi's view of the GPU
# and prints the summary tables last.
#
# Why does a deeper prefetch slow W1 (issue 12)? The main run measures, at a
# fixed worker count (8 and 14), prefetch 2, 4 and 8, each with the pinned
# footprint it holds (the "pinned MB" column: 77, 154, 308 MB) and where the
# pipeline waited (slot wait, copy thread idle, buffer wait). It measures
# the same rows with the dataset writing through non-temporal stores (rows
# marked "nt": the benchmark's dataset uses _mm_stream_si128 instead of
# memcpy), interleaved with the memcpy rows in the same rounds, so the two
# are compared on the same machine state. The second pass does the same from
# outside: glibc's memcpy switches to non-temporal stores for copies of at
# least glibc.cpu.x86_non_temporal_threshold bytes (by default a share of the
# last-level cache, far above W1's 150 KB samples), so
#   GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold=0x8000
# makes every sample memcpy (150,528 bytes) stream. Compare its "vs ref"
# medians with the main run's: each is against its own run's raw copy.
# Neither settles the cause alone; if the nt rows close the gap between
# prefetch 2 and 8, the cost is the write traffic (read-for-ownership and
# cache pollution); if not, look at the waits (pipeline depth) instead.
#
# Shipping u16 windows instead of i64 (issue 12): w2w reads the same token
# file as w2 with TokenOutput::kWindow (u16[1025] a sample: 65,600 bytes a
# batch instead of 524,288) and widens each batch on the consumer stream
# (WidenTokens, transfer/widen_tokens.h) into preallocated i64 input and
# target, the tensors w2
# ends with. Compare w2w's batches/s with w2's at the same configuration;
# w2w's note also gives its rate over w2's raw copy (to set beside w2's "vs
# ref"). Its rows add about 15-20 s to the main run (estimated, not yet
# measured: 2 pinwheel configurations x 5 repetitions x 20,000 batches at
# ~0.3-0.5 s; the pageable copy 5 x ~0.3 s; and 25 reference points of two
# raw copies, ~0.06 s and ~0.25 s, before the first row and after each).
#
# Usage: OUT=/some/dir samples/bench/gpu_run.sh [extra pinwheel_bench flags,
#        e.g. --pin_consumer_cpu=15; they go to the main and nt passes]
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

status=0
# timed NAME LIMIT FILE COMMAND...: runs COMMAND under `timeout LIMIT`, its
# output to the terminal and appended to FILE, then says how long it took
# and why it stopped; a failure is remembered in $status, the script goes on.
timed() {
  local name=$1 limit=$2 file=$3
  shift 3
  local start rc
  start=$(date +%s)
  set +e
  timeout "$limit" "$@" 2>&1 | tee -a "$file"
  rc=${PIPESTATUS[0]}
  set -e
  echo "$name: $(( $(date +%s) - start )) s, exit status $rc"
  if [ "$rc" -eq 124 ]; then
    echo "$name stopped after $limit s: its JSON lines hold the rows measured so far"
  fi
  if [ "$rc" -ne 0 ]; then status=1; fi
  return 0
}
: > "$OUT/bench.txt"
: > "$OUT/nt_threshold.txt"
: > "$OUT/quick.txt"

# The main run. 200 timed batches a W1/W3 row: batches already copied before
# the clock starts (at most the device buffers) bias GB/s by <= 1%. W2 rows
# time 20,000 batches (0.3-0.8 s each), w2w rows likewise.
timed benchmark 420 "$OUT/bench.txt" "$BIN" --device=cuda:0 \
  --workloads=w1,w2,w2w,w3 --repeat=5 \
  --w1_configs=8x2,8x4,8x8,14x2,14x4,14x8,8x2:nt,8x8:nt,14x2:nt,14x8:nt \
  --w2_configs=2x8,4x8,8x8,4x32x4,14x32x4 \
  --w2w_configs=8x8,14x32x4 \
  --w3_configs=4x4,8x4,14x8 \
  --batches=200 --w2_batches=20000 --naive_batches=20 --warmup=5 \
  --epochs_check=100 --json="$OUT/bench.jsonl" "$@"

# The same W1 rows (memcpy only) with every sample's memcpy streaming.
timed nt_threshold 120 "$OUT/nt_threshold.txt" \
  env GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold=0x8000 \
  "$BIN" --device=cuda:0 --workloads=w1 --repeat=5 \
  --w1_configs=8x2,8x8,14x2,14x8 --baselines=false --batches=200 --warmup=5 \
  --json="$OUT/nt_threshold.jsonl" "$@"

# What a user runs to size their machine.
timed quick 120 "$OUT/quick.txt" "$BIN" --device=cuda:0 --quick \
  --json="$OUT/quick.jsonl"

# Plots whatever rows were written, even after a failure.
if [ -s "$OUT/bench.jsonl" ]; then
  python3 samples/bench/plot.py "$OUT/bench.jsonl" -o "$OUT/w1_workers.svg" ||
    status=1
fi

# N loaders at once (issue 11): a loader per GPU in one process, then (with
# mpirun and >= 2 GPUs) one process per GPU; each beside the raw pinned copy
# of all GPUs at once, measured in the same run.
MULTI=${MULTI:-build-gpu/samples/bench/pinwheel_multi_bench}
if [ -x "$MULTI" ]; then
  : > "$OUT/multi_bench.txt"
  timed multi_bench 120 "$OUT/multi_bench.txt" "$MULTI"
  gpus=$(nvidia-smi -L 2>/dev/null | wc -l || true)
  if [ "$gpus" -ge 2 ] && command -v mpirun >/dev/null; then
    timed multi_bench_mpi 120 "$OUT/multi_bench.txt" \
      mpirun --allow-run-as-root -np "$gpus" "$MULTI"
  fi
fi

# Where the time goes (issue 12): copy_limits, 2 repetitions a row.
LIMITS=${LIMITS:-build-gpu/samples/bench/probes/copy_limits}
if [ -x "$LIMITS" ]; then
  : > "$OUT/copy_limits.txt"
  timed copy_limits 240 "$OUT/copy_limits.txt" "$LIMITS" --repeat=2
fi

# The summary tables last.
echo
echo "######## main run (bench.txt)"
sed -n '/^== summary/,$p' "$OUT/bench.txt" || true
echo
echo "######## w1 with GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold=0x8000 (nt_threshold.txt)"
sed -n '/^w1 summary over/,/^$/p' "$OUT/nt_threshold.txt" || true
echo "######## --quick (quick.txt)"
sed -n '/^== sizing/,$p' "$OUT/quick.txt" || true
exit "$status"
