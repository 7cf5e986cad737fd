#!/usr/bin/env bash
# W4 (issue 19) on the GPU machine: decode-bound images, pinwheel C++ and
# Python against torchvision's DataLoader, then the convnet sample on the GPU.
#
# Assumes the build in build-gpu/ (cmake -S . -B build-gpu -G Ninja
# -DCMAKE_BUILD_TYPE=Release -DPINWHEEL_BUILD_SAMPLES=ON && cmake --build
# build-gpu --target pinwheel_bench make_images _pinwheel
# pinwheel_python_stub) and, for the Python rows, a python3 with torch,
# torchvision and psutil. Writes to $OUT:
#   make_images.txt         the folder's count, mean size and mean bytes
#                           (written on the first run only: W4_ROOT, default
#                           /tmp/w4, 10,000 JPEGs of ~100 KB in 100 classes)
#   w4.txt, w4.jsonl        pinwheel_bench --workloads=w4: rows at 8 and 14
#                           workers, 5 repetitions, then the img/s table
#   bench_images.txt        samples/python/bench_images.py: torchvision's
#                           DataLoader and pinwheel (Python) at 8 and 14
#                           workers, median [min-max] of 3
#   train_images.txt        samples/python/train_images.py, 2 epochs on W4's
#                           folder on cuda
# Expected: make_images ~1-2 minutes (one thread; first run only), the rest
# ~3-4 minutes; each step is stopped at its own limit.
#
# Usage: OUT=/some/dir samples/bench/w4_gpu_run.sh [extra pinwheel_bench flags]
#   (W4_ROOT, W4_COUNT: the folder and its size; BUILD: the build folder)
set -euo pipefail

cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the folder for w4.txt, w4.jsonl, bench_images.txt}"
BUILD=${BUILD:-build-gpu}
W4_ROOT=${W4_ROOT:-/tmp/w4}
W4_COUNT=${W4_COUNT:-10000}
DEVICE=${DEVICE:-cuda:0}  # DEVICE=cpu: a dry run of the script without a GPU
mkdir -p "$OUT"
nproc | sed 's/^/host cores: /'

status=0
# timed NAME LIMIT FILE COMMAND...: as in gpu_run.sh.
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
  if [ "$rc" -ne 0 ]; then status=1; fi
  return 0
}

if [ ! -d "$W4_ROOT" ]; then
  rm -rf "$W4_ROOT.partial"
  # Written aside and renamed: an interrupted run leaves no half folder.
  timeout 400 "$BUILD/samples/bench/make_images" --out="$W4_ROOT.partial" \
    --count="$W4_COUNT" --classes=100 2>&1 | tee "$OUT/make_images.txt"
  mv "$W4_ROOT.partial" "$W4_ROOT"
fi

: > "$OUT/w4.txt"
timed w4 300 "$OUT/w4.txt" "$BUILD/samples/bench/pinwheel_bench" --device="$DEVICE" \
  --workloads=w4 --w4_root="$W4_ROOT" --w4_workers=8,14 --repeat=5 \
  --json="$OUT/w4.jsonl" "$@"

export PYTHONPATH="$PWD/$BUILD/samples/python${PYTHONPATH:+:$PYTHONPATH}"
if python3 -c "import torch, torchvision, psutil" 2>/dev/null; then
  : > "$OUT/bench_images.txt"
  timed bench_images 420 "$OUT/bench_images.txt" python3 samples/python/bench_images.py \
    --root "$W4_ROOT" --workers 8 14 --repeats 3 --json
else
  echo "bench_images skipped: python3 lacks torch, torchvision or psutil" |
    tee "$OUT/bench_images.txt"
fi
if python3 -c "import torch" 2>/dev/null; then
  : > "$OUT/train_images.txt"
  timed train_images 300 "$OUT/train_images.txt" python3 samples/python/train_images.py \
    --root "$W4_ROOT" --size 224 --batch_size 256 --num_workers 14 \
    --device "$([ "$DEVICE" = cpu ] && echo cpu || echo cuda)" \
    --epochs 2
fi

echo
echo "######## pinwheel_bench w4 (w4.txt)"
sed -n '/^w4 images/,/^$/p' "$OUT/w4.txt" || true
echo "######## bench_images.py (bench_images.txt)"
grep -E '^W4:|^  ' "$OUT/bench_images.txt" || true
exit "$status"
