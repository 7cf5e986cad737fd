#!/usr/bin/env bash
# Issue 30's measurements on a machine with two GPUs of one host, in one
# call of at most ~9 minutes (or two: --part=bench, then --part=train):
#
#   1. the image folder for the trainers (make_images, 10,000 JPEGs; outside
#      $OUT, kept between runs on the same machine);
#   2. pinwheel_multi_bench (both paths, w1 and w2, each beside the aggregate
#      raw pinned copy and a host memcpy loop measured in the same run):
#      one process with a loader per GPU; mpirun -np 2 with Open MPI's
#      default binding; mpirun --bind-to none; mpirun --map-by slot:PE=N/2;
#      and torchrun --nproc_per_node=2 (the ranks meet through a folder);
#   3. the C++ sample trainer (samples/train) under mpirun -np 2 with NCCL,
#      with the default binding, --bind-to none and as the README types it
#      (--map-by slot:PE=N/2), then with --workers/--prefetch=auto on one
#      GPU and under the README's command: "waited for data" per rank every
#      epoch;
#   4. samples/python/train_ddp.py, ResNet-50 bf16 channels_last under
#      torchrun on 1 and 2 GPUs, fed by pinwheel (decode cpu and gpu), torch's
#      DataLoader and a synthetic batch, the same per-GPU batch.
#
# Usage (from the repository root, after building pinwheel_multi_bench,
# train, make_images and the Python package in BUILD):
#   OUT=/some/dir samples/bench/multi_gpu_run.sh [BUILD] [--quick]
#       [--part=all|bench|train] [--budget=SECONDS]
# BUILD defaults to build; OUT to ./out. --quick: fewer repetitions and
# steps, no torchrun/PE rows of the bench (about 5 minutes). Knobs (the
# environment): BUDGET_S (540: a step that would start later than this
# many seconds after the start is skipped, saying so), IMAGES (the folder,
# /tmp/pinwheel-images-10k), IMAGE_COUNT (10000), BATCH (256 a GPU), STEPS
# (60), WARMUP (10), PY_BUILD (BUILD: where the Python package was built),
# CLASSES (100, of the folder), CPU_WORKERS (14: pinwheel-cpu's and the
# DataLoader's workers a rank), GPU_WORKERS (4: pinwheel-gpu's), DDP_LOADERS
# (the train_ddp.py rows; "pinwheel-cpu:10" sets that row's workers a
# rank), PYTHON (python3).
# DEVICE=cpu dry-runs the whole script without a GPU at tiny sizes (the host
# backend, gloo, a tiny model, no pinwheel-gpu runs): its numbers mean
# nothing; it proves the script.
#
# Writes to $OUT: env.txt, multi_*.txt and .jsonl, train_mpirun_*.txt,
# train_ddp_*.txt, train_ddp.jsonl (one JSON line a run) and summary.txt
# (every table, printed last). Every step runs under its own `timeout`, is
# stamped with the time, and a failure is remembered (exit 1 at the end)
# while the script goes on; steps skipped for the budget make it exit 3.
set -uo pipefail

BUILD=build
QUICK=0
PART=all
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --part=*) PART=${arg#--part=} ;;
    --budget=*) BUDGET_S=${arg#--budget=} ;;
    -*) echo "multi_gpu_run.sh: unknown flag $arg" >&2; exit 2 ;;
    *) BUILD=$arg ;;
  esac
done
case "$PART" in all|bench|train) ;; *)
  echo "multi_gpu_run.sh: --part=$PART: use all, bench or train" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-./out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUDGET_S=${BUDGET_S:-540}
IMAGES=${IMAGES:-/tmp/pinwheel-images-10k}
IMAGE_COUNT=${IMAGE_COUNT:-10000}
CLASSES=${CLASSES:-100}
BATCH=${BATCH:-256}
STEPS=${STEPS:-60}
WARMUP=${WARMUP:-10}
CPU_WORKERS=${CPU_WORKERS:-14}
GPU_WORKERS=${GPU_WORKERS:-4}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
REPEAT=5
BENCH_SIZES=(--batches=200 --w2_batches=10000)
TRAIN_FLAGS=()
DDP_FLAGS=(--model resnet50)
DDP_LOADERS=${DDP_LOADERS:-synthetic pinwheel-cpu pinwheel-gpu dataloader}
if [ "$DEVICE" = cpu ]; then
  IMAGES=${IMAGES%/}-cpu-dry-run
  IMAGE_COUNT=${IMAGE_COUNT_CPU:-64} CLASSES=4
  BATCH=8 STEPS=3 WARMUP=1 CPU_WORKERS=1 GPU_WORKERS=1
  BENCH_SIZES=(--device=cpu --host_loaders=1 --w1_samples=64 --w1_side=16 --w1_batch=8
               --batches=10 --w2_tokens=100000 --w2_seq_len=64 --w2_batch=4 --w2_batches=20
               --warmup=2 --memcpy_mib=1 --memcpy_seconds=0.05)
  TRAIN_FLAGS=(--device=cpu --synthetic_records=4000 --hidden=64)
  DDP_FLAGS=(--model tiny --size 32 --device cpu)
  DDP_LOADERS="synthetic pinwheel-cpu dataloader"
elif [ "$DEVICE" != cuda ]; then
  echo "multi_gpu_run.sh: DEVICE=$DEVICE: use cuda or cpu" >&2; exit 2
fi
if [ "$QUICK" = 1 ]; then
  REPEAT=3
  [ "$DEVICE" = cuda ] && STEPS=${QUICK_STEPS:-30} WARMUP=${QUICK_WARMUP:-5}
fi
MB=$BUILD/samples/bench/pinwheel_multi_bench
TRAIN=$BUILD/samples/train/train
MAKE_IMAGES=$BUILD/samples/bench/make_images
# The Python package: built in BUILD, or in PY_BUILD (e.g. build-gpu-py,
# what samples/python/gpu_run.sh builds against the machine's python3).
PY_BUILD=${PY_BUILD:-$BUILD}
export PYTHONPATH=$PY_BUILD/samples/python${PYTHONPATH:+:$PYTHONPATH}
# mpirun as root (the device machines run as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

START=$(date +%s)
status=0
stamp() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - START ))s] $*"; }

# step NAME LIMIT FILE COMMAND...: runs COMMAND under `timeout`, its output
# to the terminal and to FILE; says how long it took and why it stopped.
# The limit is LIMIT, or less so as to end by the budget (+30 s); a step
# with under a third of LIMIT left is skipped, saying so (return 3). A
# failure sets $status and returns its exit code; the script goes on.
step() {
  local name=$1 limit=$2 file=$3
  shift 3
  local left=$(( BUDGET_S - ($(date +%s) - START) ))
  if [ $(( left * 3 )) -lt "$limit" ]; then
    stamp "SKIPPED $name: ${left}s of the ${BUDGET_S}s budget left, it may take ${limit}s" |
      tee -a "$OUT/skipped.txt"
    return 3
  fi
  [ $(( left + 30 )) -lt "$limit" ] && limit=$(( left + 30 ))
  stamp "start $name (limit ${limit}s): $*"
  local t0=$(date +%s) rc why
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$file"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    stamp "done $name in $(( $(date +%s) - t0 ))s"
  else
    if [ "$rc" -eq 124 ]; then why="timed out after ${limit}s"; else why="exit $rc"; fi
    stamp "FAILED $name ($why) after $(( $(date +%s) - t0 ))s" | tee -a "$OUT/failed.txt"
    status=1
  fi
  return "$rc"
}

rm -f "$OUT/failed.txt" "$OUT/skipped.txt"
{
  stamp "multi_gpu_run.sh --part=$PART quick=$QUICK budget=${BUDGET_S}s build=$BUILD"
  git log -1 --oneline 2>/dev/null
  nvidia-smi --query-gpu=index,name,driver_version,pcie.link.gen.current,pcie.link.width.current,memory.total --format=csv 2>&1
  nvidia-smi topo -m 2>&1
  echo "cores: nproc=$(nproc), online=$(getconf _NPROCESSORS_ONLN)"
  lscpu 2>/dev/null | grep -E "Model name|Socket|Core|Thread|NUMA"
  grep -E "MemTotal" /proc/meminfo
  mpirun --version 2>&1 | head -1
  $PYTHON -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'cuda', torch.version.cuda)" 2>&1
  $PYTHON -c "import pinwheel; print('pinwheel', pinwheel.build_info())" 2>&1
} | tee "$OUT/env.txt"
for bin in "$MB" "$TRAIN" "$MAKE_IMAGES"; do
  [ -x "$bin" ] || { stamp "missing $bin: build it first (cmake --build $BUILD --target pinwheel_multi_bench train make_images _pinwheel)"; status=1; }
done
[ $status -eq 0 ] || exit 1

# --- 2. pinwheel_multi_bench ------------------------------------------------
if [ "$PART" != train ]; then
  HALF=$(( $(nproc) / 2 ))
  BENCH=(--workers=$CPU_WORKERS --prefetch=4 --repeat=$REPEAT "${BENCH_SIZES[@]}"
         --token_file=/tmp/pinwheel_multi_bench_tokens.u16)
  step multi_one_process 120 "$OUT/multi_one_process.txt" \
    "$MB" "${BENCH[@]}" --host_loaders=2 --json="$OUT/multi_one_process.jsonl"
  step multi_mpirun_default 120 "$OUT/multi_mpirun_default.txt" \
    mpirun -np 2 "$MB" "${BENCH[@]}" --json="$OUT/multi_mpirun_default.jsonl"
  step multi_mpirun_bind_none 120 "$OUT/multi_mpirun_bind_none.txt" \
    mpirun -np 2 --bind-to none "$MB" "${BENCH[@]}" --json="$OUT/multi_mpirun_bind_none.jsonl"
  if [ "$QUICK" = 0 ]; then
    step multi_mpirun_pe 120 "$OUT/multi_mpirun_pe.txt" \
      mpirun -np 2 --map-by "slot:PE=$HALF" "$MB" "${BENCH[@]}" \
      --json="$OUT/multi_mpirun_pe.jsonl"
    # The same with w1's worker copy (and the staged copy) written through
    # non-temporal stores: does skipping the write-allocate reads lift the
    # host-memory ceiling?
    if [ "$DEVICE" = cuda ]; then
      step multi_mpirun_pe_streaming 120 "$OUT/multi_mpirun_pe_streaming.txt" \
        mpirun -np 2 --map-by "slot:PE=$HALF" "$MB" "${BENCH[@]}" \
        --workloads=w1 --paths=workers,staged --streaming_stores --json="$OUT/multi_mpirun_pe_streaming.jsonl"
    fi
    if grep -q "FAILED multi_mpirun_pe (" "$OUT/failed.txt" 2>/dev/null; then
      # Hyperthreads: PE counts cores unless hardware threads are the CPUs.
      step multi_mpirun_pe_hwthreads 120 "$OUT/multi_mpirun_pe_hwthreads.txt" \
        mpirun -np 2 --use-hwthread-cpus --map-by "slot:PE=$HALF" "$MB" "${BENCH[@]}" \
        --json="$OUT/multi_mpirun_pe_hwthreads.jsonl"
    fi
    rm -rf "$OUT/multi_torchrun_ranks"
    step multi_torchrun 120 "$OUT/multi_torchrun.txt" \
      $PYTHON -m torch.distributed.run --standalone --nproc_per_node=2 --no-python \
      "$MB" "${BENCH[@]}" --results_dir="$OUT/multi_torchrun_ranks" \
      --json="$OUT/multi_torchrun.jsonl"
  fi

  # --- 3. the C++ trainer under mpirun with NCCL ----------------------------
  step train_mpirun_default 150 "$OUT/train_mpirun_default.txt" \
    mpirun -np 2 "$TRAIN" "${TRAIN_FLAGS[@]}"
  step train_mpirun_bind_none 150 "$OUT/train_mpirun_bind_none.txt" \
    mpirun -np 2 --bind-to none "$TRAIN" "${TRAIN_FLAGS[@]}"
  # The README's command; then with the loader sizing itself (issue 33),
  # on one GPU and under that command.
  step train_mpirun_pe 150 "$OUT/train_mpirun_pe.txt" \
    mpirun -np 2 --map-by "slot:PE=$HALF" --bind-to core "$TRAIN" "${TRAIN_FLAGS[@]}"
  step train_auto_one 150 "$OUT/train_auto_one.txt" \
    "$TRAIN" "${TRAIN_FLAGS[@]}" --workers=auto --prefetch=auto
  step train_mpirun_pe_auto 150 "$OUT/train_mpirun_pe_auto.txt" \
    mpirun -np 2 --map-by "slot:PE=$HALF" --bind-to core "$TRAIN" "${TRAIN_FLAGS[@]}" \
    --workers=auto --prefetch=auto
fi

# --- 4. train_ddp.py on 1 and 2 GPUs ----------------------------------------
if [ "$PART" != bench ]; then
  rm -f "$OUT/train_ddp.jsonl"
  want=cuda
  [ "$DEVICE" = cpu ] && want=host
  if ! $PYTHON -c "import sys, pinwheel; b = pinwheel.build_info()['backend']; sys.exit(0 if b == '$want' else 'pinwheel from ' + pinwheel.__file__ + ' has the ' + b + ' backend, not $want')"; then
    stamp "FAILED: $PYTHON cannot import a $want pinwheel from $PY_BUILD/samples/python (build the _pinwheel target there, or set PY_BUILD): no train_ddp.py runs" |
      tee -a "$OUT/failed.txt"
    status=1
    DDP_LOADERS=""
  fi
  if [ -f "$IMAGES/.complete" ]; then
    stamp "images: $IMAGES already holds $(cat "$IMAGES/.complete")"
  else
    rm -rf "$IMAGES"
    if step make_images 180 "$OUT/make_images.txt" \
        "$MAKE_IMAGES" --out="$IMAGES" --count="$IMAGE_COUNT" --classes="$CLASSES"; then
      echo "$IMAGE_COUNT JPEGs" > "$IMAGES/.complete"
    fi
  fi
  # Warm the page cache once, so that no loader pays the first read.
  cat "$IMAGES"/*/* > /dev/null 2>&1
  for gpus in 1 2; do
    [ -n "$DDP_LOADERS" ] || break
    for spec in $DDP_LOADERS; do
      loader=${spec%%:*}  # "pinwheel-cpu:10": 10 workers a rank
      workers=$CPU_WORKERS
      [ "$loader" = pinwheel-gpu ] && workers=$GPU_WORKERS
      [ "$spec" != "$loader" ] && workers=${spec#*:}
      step "train_ddp_${loader}_${workers}w_${gpus}gpu" 120 \
        "$OUT/train_ddp_${loader}_${workers}w_${gpus}gpu.txt" \
        $PYTHON -m torch.distributed.run --standalone --nproc_per_node=$gpus \
        samples/python/train_ddp.py --root "$IMAGES" --loader "$loader" "${DDP_FLAGS[@]}" \
        --batch_size "$BATCH" --workers "$workers" --steps "$STEPS" --warmup "$WARMUP" \
        --json "$OUT/train_ddp.jsonl"
    done
  done
fi

# --- the tables --------------------------------------------------------------
{
  stamp "summary (quick=$QUICK, part=$PART)"
  for f in "$OUT"/multi_*.txt; do
    [ -f "$f" ] || continue
    echo; echo "### $(basename "$f" .txt)"
    grep -E "^rank [0-9]+ of" "$f"
    sed -n '/^== summary/,$p' "$f"
  done
  for f in "$OUT"/train_mpirun_*.txt "$OUT"/train_auto_*.txt; do
    [ -f "$f" ] || continue
    echo; echo "### $(basename "$f" .txt)"
    grep -E "^epoch |per rank|final held-out|NUMA|loader.*auto" "$f"
  done
  if [ -f "$OUT/train_ddp.jsonl" ]; then
    echo; echo "### train_ddp.py (${DDP_FLAGS[*]}, bf16 channels_last, batch $BATCH a rank)"
    $PYTHON - "$OUT/train_ddp.jsonl" <<'EOF'
import json, sys
runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
ceiling = {r["world_size"]: r["images_per_s"] for r in runs if r["loader"] == "synthetic"}
key = lambda r: (r["loader"], r["workers"])
one = {key(r): r["images_per_s"] for r in runs if r["world_size"] == 1}
row = "%-13s %7s %4s %9s %7s %8s %6s %18s %6s %12s"
print(row % ("loader", "workers", "GPUs", "images/s", "a GPU", "of synth", "1->2",
             "waited % a rank", "cores", "cores a rank"))
for r in runs:
    w = r["world_size"]
    ranks = sorted(r["ranks"], key=lambda x: x["rank"])
    synth = ceiling.get(w)
    scale = r["images_per_s"] / one[key(r)] if w > 1 and key(r) in one else None
    print(row % (r["loader"], "-" if r["loader"] == "synthetic" else r["workers"], w,
                 "%.0f" % r["images_per_s"], "%.0f" % r["images_per_s_per_rank"],
                 "%.3f" % (r["images_per_s"] / synth) if synth else "-",
                 "%.2fx" % scale if scale else "-",
                 " ".join("%.1f" % x["waited_percent"] for x in ranks), "%.1f" % r["cores"],
                 " ".join("%.1f" % x["cores"] for x in ranks)))
EOF
  fi
  [ -f "$OUT/skipped.txt" ] && { echo; echo "### skipped (over budget)"; cat "$OUT/skipped.txt"; }
  [ -f "$OUT/failed.txt" ] && { echo; echo "### FAILED"; cat "$OUT/failed.txt"; }
  if [ "$status" -eq 0 ] && [ -f "$OUT/skipped.txt" ]; then
    status=3  # nothing failed, but not everything ran
  fi
  stamp "end, status $status"
  echo "$status" > "$OUT/status"
} 2>&1 | tee "$OUT/summary.txt"
exit "$(cat "$OUT/status")"
