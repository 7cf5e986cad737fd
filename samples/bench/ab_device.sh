#!/usr/bin/env bash
# A before/after comparison of two trees on one GPU machine, in as few calls
# as the device tool allows: this tree ("new") against an unpacked
# `git archive` of an older commit ("old", in $BASE), both built Release for
# sm_90 with the same flags.
#
# Usage, from the repository root on the GPU machine, after
# `source .device-deps/install.sh` and `.ci/gpu-run build` (which points the
# staged pkg-config files at /opt/deps):
#   OUT=/some/dir BASE=.ab-base samples/bench/ab_device.sh STEP...
# Steps, in the order a lease runs them:
#   build   configure and build pinwheel_bench, pinwheel_w4_decode and
#           make_images in /tmp/ab-old and /tmp/ab-new (about 1 minute each
#           on 16 cores)
#   w4      the GPU decode row (pinwheel_w4_decode --decode=gpu, 4 workers)
#           alternately old/new, $W4_ROUNDS rounds (default 3), on
#           $W4_COUNT (default 5000) JPEGs made once in /tmp/w4ab
#   ab      samples/bench/ab_run.sh over W1/W2/W3 with both paths (workers
#           and gather rows), $ROUNDS rounds (default "1 2 3")
# Writes its logs and tables under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the folder for the results}"
BASE=${BASE:-.ab-base}
mkdir -p "$OUT"
pc=/opt/deps/usr/lib/x86_64-linux-gnu/pkgconfig
[[ -d $pc ]] && export PKG_CONFIG_PATH=$pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
status=0

step_build() {
  local which src
  for which in old new; do
    src=.
    [[ $which == old ]] && src=$BASE
    echo "== build $which from $src $(date +%T)"
    { cmake -S "$src" -B "/tmp/ab-$which" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DPINWHEEL_BUILD_TESTS=OFF &&
      cmake --build "/tmp/ab-$which" -j"$(nproc)" --target pinwheel_bench \
        pinwheel_w4_decode make_images; } >"$OUT/ab-build-$which.log" 2>&1 ||
      { tail -30 "$OUT/ab-build-$which.log"; status=1; }
  done
}

step_w4() {
  local root=/tmp/w4ab round which
  if [[ ! -d $root ]]; then
    timeout 300 /tmp/ab-new/samples/bench/make_images --out="$root.partial" \
      --count="${W4_COUNT:-5000}" --classes=50 >"$OUT/ab-make-images.txt" 2>&1 &&
      mv "$root.partial" "$root"
  fi
  for round in $(seq 1 "${W4_ROUNDS:-3}"); do
    local order="old new"
    ((round % 2)) || order="new old"
    for which in $order; do
      echo "== w4 round $round $which $(date +%T)"
      timeout 120 "/tmp/ab-$which/samples/bench/pinwheel_w4_decode" \
        --root="$root" --decode=gpu --workers=4 --repeat=1 --batches=40 2>&1 |
        sed "s/^/$which $round: /" | tee -a "$OUT/ab-w4.txt"
    done
  done
}

step_ab() {
  OLD=/tmp/ab-old/samples/bench/pinwheel_bench \
    NEW=/tmp/ab-new/samples/bench/pinwheel_bench OUT="$OUT" \
    samples/bench/ab_run.sh --device=cuda:0 --workloads=w1,w2,w3 --repeat=3 \
    --w1_configs=14x2,0x8x4:g --w2_configs=14x64x8,0x32x4:g \
    --w3_configs=4x4,0x4x4:g --batches=200 --w2_batches=20000 \
    --naive_batches=5 --warmup=5 || status=1
}

for step in "$@"; do
  "step_$step" || status=1
done
exit $status
