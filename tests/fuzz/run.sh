#!/usr/bin/env bash
# Builds the libFuzzer targets (ParseRecordFileHeader, LoaderCheckpoint::
# FromBytes, the tar reader, the JPEG decoder wrapper, the GPU decoder's
# JPEG framing check) with clang in a build directory of their own, seeds
# each corpus with valid inputs and runs each for its share of a bounded
# time.
#
# Usage: tests/fuzz/run.sh [SECONDS]   (default 60, split between the targets)
# Environment: PINWHEEL_FUZZ_BUILD_DIR (default build-fuzz), JOBS (default 2).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PINWHEEL_FUZZ_BUILD_DIR:-"$root/build-fuzz"}
seconds=${1:-60}
jobs=${JOBS:-2}
targets=(record_header_fuzzer checkpoint_fuzzer tar_reader_fuzzer
         jpeg_decoder_fuzzer jpeg_framing_fuzzer)
# Each target's share of the same total time: the record header parser, the
# JPEG decoder and the JPEG framing check, the larger input spaces, a
# quarter each; the checkpoint parser and the tar reader an eighth each.
shares=($((seconds / 4)) $((seconds / 8)) $((seconds / 8)) $((seconds / 4))
        $((seconds - 2 * (seconds / 4) - 2 * (seconds / 8))))

cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_CXX_COMPILER=clang++ \
  -DPINWHEEL_BUILD_FUZZERS=ON \
  -DPINWHEEL_ENABLE_CUDA=OFF \
  -DPINWHEEL_BUILD_TESTS=ON \
  -DPINWHEEL_BUILD_SAMPLES=OFF
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

for i in "${!targets[@]}"; do
  name=${targets[$i]}
  time=${shares[$i]}
  ((time >= 1)) || time=1
  fuzzer="$build/tests/fuzz/$name"
  seeds="$build/tests/fuzz/${name%_fuzzer}_seeds"
  corpus="$build/tests/fuzz/${name%_fuzzer}_corpus"
  mkdir -p "$seeds" "$corpus"
  PINWHEEL_WRITE_SEEDS="$seeds" "$fuzzer"
  echo "=== tests/fuzz/run.sh: $name for $time s"
  # New inputs go to $corpus (kept between runs); the seeds are read only.
  "$fuzzer" -max_total_time="$time" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "$corpus" "$seeds"
done
