#!/usr/bin/env bash
# Makes the virtual environment the Python package (samples/python) is built
# and tested with: python3 -m venv, then pip install -r
# third_party/python-requirements.txt (from PyPI). A venv works alike with
# pyenv's Python and with Debian's (PEP 668: no pip install into the system);
# CMake finds it at the same place (samples/python/CMakeLists.txt).
#   PINWHEEL_VENV   where (default ${XDG_CACHE_HOME:-~/.cache}/pinwheel/venv)
#   PINWHEEL_PYTHON the interpreter to base it on (default python3)
# Idempotent: a venv made from the same interpreter and requirements is left
# alone (well under a second). Never fails the caller: without the venv the
# C++ build goes on and the Python package is skipped, which CMake says and
# ctest's python_tests reports as Skipped. Prints one line saying what it did.
set -uo pipefail

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
requirements="$dir/python-requirements.txt"
venv="${PINWHEEL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/pinwheel/venv}"
python="${PINWHEEL_PYTHON:-python3}"

skip() {
  echo "install-deps: Python package skipped: $1" >&2
  exit 0
}

command -v "$python" >/dev/null || skip "no $python on PATH"
base="$("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])' 2>/dev/null)" ||
  skip "$python does not run"
want="$base $(sha256sum "$requirements" | cut -d' ' -f1)"
stamp="$venv/.pinwheel-requirements"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(<"$stamp")" == "$want" ]]; then
  echo "install-deps: Python venv $venv up to date"
  exit 0
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
if ! "$python" -m venv "$venv" >"$log" 2>&1; then
  cat "$log" >&2
  rm -rf "$venv"
  skip "'$python -m venv' failed (Debian: the python3-venv package)"
fi
if ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install -q \
       -r "$requirements" >"$log" 2>&1; then
  cat "$log" >&2
  rm -rf "$venv"
  skip "pip install -r $requirements failed (output above)"
fi
echo "$want" >"$stamp"
echo "install-deps: Python venv $venv made ($(tr '\n' ' ' < <(grep -v '^#' "$requirements")))"
