#!/usr/bin/env bash
# Makes the virtual environment the Python package (samples/python) is built
# and tested with: python3 -m venv, then pip install -r
# third_party/python-requirements.txt (from PyPI). A venv works alike with
# pyenv's Python and with Debian's (PEP 668: no pip install into the system);
# CMake finds it at the same place (samples/python/CMakeLists.txt).
#   --tests         also third_party/python-test-requirements.txt (torch, for
#                   the torch tests: 4.6 GB installed, so only the README's
#                   test line asks for it)
#   PINWHEEL_PYTHON_VENV  where (default ${XDG_CACHE_HOME:-~/.cache}/pinwheel/venv;
#                   the same name as CMake's cache variable; PINWHEEL_VENV,
#                   its older name, is read too)
#   PINWHEEL_PYTHON the interpreter to base it on (default python3)
# Idempotent: a venv made from the same interpreter and requirements (and,
# with --tests, holding the same test requirements) is left alone (well
# under a second); a venv that has the test requirements serves a call
# without --tests as it is. Never fails the caller: without the venv the
# C++ build goes on and the Python package is skipped, which CMake says and
# ctest's python_tests reports as Skipped; without the test requirements
# the torch tests skip, saying so (CI sets PINWHEEL_REQUIRE_TORCH=1, which
# makes them fail instead: samples/python/tests/conftest.py). Prints one
# line saying what it did.
set -uo pipefail

tests=0
for arg in "$@"; do
  case "$arg" in
    --tests) tests=1 ;;
    *)
      echo "install-python-deps: unknown argument '$arg' (usage: $0 [--tests])" >&2
      exit 2
      ;;
  esac
done

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
requirements="$dir/python-requirements.txt"
test_requirements="$dir/python-test-requirements.txt"
venv="${PINWHEEL_PYTHON_VENV:-${PINWHEEL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/pinwheel/venv}}"
python="${PINWHEEL_PYTHON:-python3}"

skip() {
  echo "install-deps: Python package skipped: $1" >&2
  exit 0
}

# pinned REQUIREMENTS_FILE: its pins on one line, for the message.
pinned() {
  tr '\n' ' ' < <(sed -e 's/[#;].*//' "$1" | awk 'NF { print $1 }')
}

command -v "$python" >/dev/null || skip "no $python on PATH"
base="$("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])' 2>/dev/null)" ||
  skip "$python does not run"
want="$base $(sha256sum "$requirements" | cut -d' ' -f1)"
stamp="$venv/.pinwheel-requirements"
test_want="$want $(sha256sum "$test_requirements" | cut -d' ' -f1)"
test_stamp="$venv/.pinwheel-test-requirements"

log="$(mktemp)"
trap 'rm -f "$log"' EXIT

# Installs the test requirements into the venv (with the package's own, so
# that pip keeps their pins); on failure says so and leaves the venv as it
# is: the torch tests then skip, or fail under PINWHEEL_REQUIRE_TORCH=1.
install_test_requirements() {
  rm -f "$test_stamp"
  if ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install -q \
         -r "$requirements" -r "$test_requirements" >"$log" 2>&1; then
    cat "$log" >&2
    echo "install-deps: pip install -r $test_requirements failed (output above):" \
         "the torch tests will skip (fail under PINWHEEL_REQUIRE_TORCH=1)" >&2
    return
  fi
  echo "$test_want" >"$test_stamp"
  echo "install-deps: Python venv $venv: test requirements installed ($(pinned "$test_requirements"))"
}

if [[ -x "$venv/bin/python" && -f "$stamp" && "$(<"$stamp")" == "$want" ]]; then
  if ((!tests)); then
    echo "install-deps: Python venv $venv up to date"
  elif [[ -f "$test_stamp" && "$(<"$test_stamp")" == "$test_want" ]]; then
    echo "install-deps: Python venv $venv up to date, test requirements included"
  else
    install_test_requirements
  fi
  exit 0
fi

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
echo "install-deps: Python venv $venv made ($(pinned "$requirements"))"
if ((tests)); then
  install_test_requirements
fi
