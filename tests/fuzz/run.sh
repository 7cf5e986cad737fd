#!/usr/bin/env bash
# Builds the libFuzzer target for ParseRecordFileHeader with clang in a
# build directory of its own, seeds its corpus with valid headers and runs it
# for a bounded time.
#
# Usage: tests/fuzz/run.sh [SECONDS]   (default 60)
# Environment: PINWHEEL_FUZZ_BUILD_DIR (default build-fuzz), JOBS (default 2).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PINWHEEL_FUZZ_BUILD_DIR:-"$root/build-fuzz"}
seconds=${1:-60}
jobs=${JOBS:-2}

cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_CXX_COMPILER=clang++ \
  -DPINWHEEL_BUILD_FUZZERS=ON \
  -DPINWHEEL_ENABLE_CUDA=OFF \
  -DPINWHEEL_BUILD_TESTS=ON \
  -DPINWHEEL_BUILD_SAMPLES=OFF
cmake --build "$build" -j "$jobs" --target record_header_fuzzer

fuzzer="$build/tests/fuzz/record_header_fuzzer"
seeds="$build/tests/fuzz/record_header_seeds"
corpus="$build/tests/fuzz/record_header_corpus"
mkdir -p "$seeds" "$corpus"
PINWHEEL_WRITE_SEEDS="$seeds" "$fuzzer"

# New inputs go to $corpus (kept between runs); the seeds are read only.
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "$corpus" "$seeds"
