#!/usr/bin/env bash
# .ci/run's wheel section (issue 31 item 1): builds the pinwheel-loader wheel
# (samples/python/build_wheel.sh), installs it into a fresh venv outside the
# repository, and runs .ci/wheel_smoke.py there with everything a user's
# machine would lack out of reach, in a private mount namespace
# (unshare -m; root, no container needed):
#   - the repository (its build trees and sources) and the project's venv
#     (~/.cache/pinwheel): an empty tmpfs over each;
#   - the CUDA toolkit (/usr/local/cuda): an empty tmpfs;
#   - Debian's Abseil, oneTBB and libjpeg-turbo libraries: /dev/null bound
#     over each file, so that the loader cannot use them even by mistake;
#   - LD_LIBRARY_PATH unset.
# ldd then must resolve every Abseil, oneTBB and libjpeg-turbo library of
# the extension into the wheel's pinwheel_loader.libs/.
# Usage: .ci/wheel-check.sh [pip wheel arguments...]
#   PINWHEEL_WHEEL=<a .whl built before> checks that one instead of building.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo="$(pwd)"

start=$SECONDS
if [[ -n "${PINWHEEL_WHEEL:-}" ]]; then  # a wheel built before
  wheel="$PINWHEEL_WHEEL"
else
  mkdir -p build-wheel
  samples/python/build_wheel.sh build-wheel/dist "$@" | tee build-wheel/build.log
  wheel="$(tail -1 build-wheel/build.log)"
  echo "wheel-check: built $wheel in $((SECONDS - start)) s"
fi

work="$(mktemp -d /tmp/pinwheel-wheel-check.XXXXXX)"
trap 'rm -rf "$work"' EXIT
start=$SECONDS
python3 -m venv "$work/venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$work/venv/bin/pip" install -q "$wheel"
echo "wheel-check: fresh venv made and the wheel installed with its dependencies in $((SECONDS - start)) s"
cp .ci/wheel_smoke.py "$work/"

hide=("$repo" /usr/local/cuda "${XDG_CACHE_HOME:-$HOME/.cache}/pinwheel")
mapfile -t system_libs < <(find /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu \
  -maxdepth 1 -type f \( -name 'libabsl_*.so*' -o -name 'libtbb*.so*' \
  -o -name 'libturbojpeg.so*' -o -name 'libjpeg.so*' \) 2>/dev/null)
echo "wheel-check: hiding ${hide[*]} and ${#system_libs[@]} system libraries"

unshare --mount --propagation private env -u LD_LIBRARY_PATH \
  WORK="$work" bash -s "${hide[@]}" -- "${system_libs[@]}" <<'INNER'
set -euo pipefail
while [[ "$1" != -- ]]; do
  [[ -d "$1" ]] && mount -t tmpfs -o ro,size=1m none "$1"
  shift
done
shift
for lib in "$@"; do mount --bind /dev/null "$lib"; done
cd "$WORK"
extension=("$WORK"/venv/lib/python3*/site-packages/pinwheel/_pinwheel*.so)
echo "wheel-check: ldd ${extension[0]}"
ldd "${extension[0]}" | tee ldd.txt
if grep -E 'libabsl|libtbb|libturbojpeg|libjpeg' ldd.txt | grep -v 'pinwheel_loader.libs/'; then
  echo "wheel-check: the libraries above resolve outside the wheel" >&2
  exit 1
fi
if grep 'not found' ldd.txt; then
  echo "wheel-check: the libraries above are not found" >&2
  exit 1
fi
"$WORK/venv/bin/python" wheel_smoke.py
INNER
echo "wheel-check: passed"
