#!/usr/bin/env bash
# The GPU machine's run of the Python package and the LibTorch sample:
#   1. builds pinwheel._pinwheel (with the cuda backend) and libtorch_pinwheel
#      in build-gpu-py/ against the machine's python3 and its torch;
#   2. the pytest suite with torch on the GPU (test_torch.py's cases live);
#   3. bench_vs_torch.py: pinwheel vs DataLoader(pin_memory=True) on W1, W2,
#      W3, in one process;
#   4. libtorch_pinwheel --mode=train, then --mode=bench (vs torch::data's
#      DataLoader on W1 and W2).
# About 3-4 minutes on an H100 with 16 cores; no network needed.
#
# What it needs there: cmake, ninja, g++, the CUDA toolkit; python3 with
# torch, numpy and its headers; the Debian libraries staged in .device-deps/
# (../shared/device/stage-deps.sh) plus, for a python3 without them, the
# wheels of nanobind and pytest in .device-deps/ (pure Python, any version
# of Python 3):
#   pip download --no-deps --only-binary=:all: -d .device-deps \
#       nanobind==3.1.0 pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 \
#       packaging==26.3 Pygments==2.21.0
# Usage, from the repository root on the GPU machine (carry .device-deps):
#   source .device-deps/install.sh; OUT=/some/dir samples/python/gpu_run.sh
# Writes to $OUT: build.log pytest.log bench_vs_torch.txt bench_vs_torch.jsonl
# libtorch.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/pinwheel-python-gpu}"
BUILD="${BUILD:-build-gpu-py}"
mkdir -p "$OUT"
status=0
start=$SECONDS
python="$(command -v python3)"

# Pure-Python wheels unpacked onto PYTHONPATH (no pip needed).
missing=()
for module in nanobind pytest; do
  "$python" -c "import $module" 2>/dev/null || missing+=("$module")
done
if ((${#missing[@]})); then
  site="$PWD/.device-deps/site-packages"
  mkdir -p "$site"
  for wheel in .device-deps/*.whl; do
    [[ -e "$wheel" ]] && "$python" -m zipfile -e "$wheel" "$site"
  done
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  echo "python: ${missing[*]} from the wheels in .device-deps/"
fi
"$python" - <<'EOF'
import sys, numpy, torch
print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}, torch {torch.__version__}, "
      f"cuda {torch.version.cuda}, {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'}")
EOF

torch_prefix="$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
echo "=== build ($BUILD)"
# Each target on its own: a sample that failed to configure or compile
# leaves the other one built.
build_ok=1
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPython_EXECUTABLE="$python" -DPINWHEEL_PYTHON_VENV=/nonexistent \
  -DCMAKE_PREFIX_PATH="$torch_prefix" >"$OUT/build.log" 2>&1 || build_ok=0
grep "pinwheel:" "$OUT/build.log"
for target in pinwheel_python_stub libtorch_pinwheel; do
  echo "--- cmake --build --target $target" >>"$OUT/build.log"
  cmake --build "$BUILD" -j"$(nproc)" --target "$target" >>"$OUT/build.log" 2>&1 ||
    { build_ok=0; echo "build of $target FAILED:"; tail -30 "$OUT/build.log"; }
done
if ((build_ok)); then
  echo "build: ok ($((SECONDS - start)) s)"
else
  echo "build: FAILED (see build.log; the rest runs with whatever was built)"
  status=1
fi
export PYTHONPATH="$PWD/$BUILD/samples/python${PYTHONPATH:+:$PYTHONPATH}"

echo "=== pytest (GPU cases live)"
timeout 240 "$python" samples/python/tests/run_pytest.py samples/python/tests -q \
  -p no:cacheprovider -rs >"$OUT/pytest.log" 2>&1 || status=1
tail -15 "$OUT/pytest.log"

echo "=== bench_vs_torch.py"
rm -f "$OUT/bench_vs_torch.jsonl"
timeout 300 "$python" samples/python/bench_vs_torch.py --json "$OUT/bench_vs_torch.jsonl" \
  2>&1 | tee "$OUT/bench_vs_torch.txt" || status=1

echo "=== libtorch_pinwheel"
if [[ -x "$BUILD/samples/libtorch/libtorch_pinwheel" ]]; then
  { timeout 120 "$BUILD/samples/libtorch/libtorch_pinwheel" --mode=train &&
    timeout 240 "$BUILD/samples/libtorch/libtorch_pinwheel" --mode=bench; } 2>&1 |
    tee "$OUT/libtorch.txt" || status=1
else
  echo "libtorch_pinwheel was not built (see build.log)" | tee "$OUT/libtorch.txt"
  status=1
fi
echo "gpu_run: $((SECONDS - start)) s, exit status $status"
exit $status
