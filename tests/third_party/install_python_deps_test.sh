#!/usr/bin/env bash
# third_party/install-python-deps.sh's bookkeeping, without the network: a
# fake venv whose bin/python records the pip commands it is given (and fails
# them when FAKE_PIP_RC says so) stands in for the real one.
#   - a venv up to date is left alone, with or without --tests;
#   - --tests on a venv without the test requirements installs them (with
#     the package's own, so pip keeps their pins) and stamps them;
#   - a failed test install never fails the caller, says that the torch
#     tests will skip, and leaves the venv and its base stamp as they were;
#   - an unknown argument is refused, naming it (both scripts).
# Usage: install_python_deps_test.sh SOURCE_DIR. Exits 77 (ctest's Skipped)
# without python3, which the script needs to tell its venv apart.
set -euo pipefail
src="$1"
script="$src/third_party/install-python-deps.sh"
requirements="$src/third_party/python-requirements.txt"
test_requirements="$src/third_party/python-test-requirements.txt"
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
venv="$work/venv"
mkdir -p "$venv/bin"
cat >"$venv/bin/python" <<'FAKE'
#!/usr/bin/env bash
echo "$*" >>"$(dirname "$0")/../pip.log"
exit "${FAKE_PIP_RC:-0}"
FAKE
chmod +x "$venv/bin/python"
base="$(python3 -c 'import sys; print(sys.executable, sys.version.split()[0])')"
want="$base $(sha256sum "$requirements" | cut -d' ' -f1)"
test_want="$want $(sha256sum "$test_requirements" | cut -d' ' -f1)"
echo "$want" >"$venv/.pinwheel-requirements"

fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# run ARGS...: runs the script on the fake venv; sets rc, out, err.
run() {
  rc=0
  PINWHEEL_PYTHON_VENV="$venv" PINWHEEL_VENV=/nonexistent PINWHEEL_PYTHON=python3 bash "$script" "$@" \
    >"$work/out" 2>"$work/err" || rc=$?
  out="$(<"$work/out")"
  err="$(<"$work/err")"
}

run
[[ $rc == 0 && "$out" == "install-deps: Python venv $venv up to date" ]] ||
  fail "up to date without --tests: rc $rc, '$out' '$err'"
[[ ! -e "$venv/pip.log" ]] || fail "pip ran on a venv up to date"

run --tests
[[ $rc == 0 && "$out" == *"test requirements installed (torch==2.11.0 "* ]] ||
  fail "--tests on a venv without them: rc $rc, '$out' '$err'"
[[ "$(<"$venv/pip.log")" == "-m pip install -q -r $requirements -r $test_requirements" ]] ||
  fail "pip was asked: $(<"$venv/pip.log")"
[[ "$(<"$venv/.pinwheel-test-requirements")" == "$test_want" ]] || fail "no test stamp written"

rm "$venv/pip.log"
run --tests
[[ $rc == 0 && "$out" == "install-deps: Python venv $venv up to date, test requirements included" ]] ||
  fail "--tests on a venv up to date: rc $rc, '$out' '$err'"
run
[[ $rc == 0 && "$out" == "install-deps: Python venv $venv up to date" ]] ||
  fail "a venv with the test requirements, without --tests: rc $rc, '$out' '$err'"
[[ ! -e "$venv/pip.log" ]] || fail "pip ran on a venv up to date: $(<"$venv/pip.log")"

echo "an older torch pin" >"$venv/.pinwheel-test-requirements"
FAKE_PIP_RC=1 run --tests
[[ $rc == 0 && "$err" == *"failed"*"the torch tests will skip (fail under PINWHEEL_REQUIRE_TORCH=1)"* ]] ||
  fail "a failed test install: rc $rc, '$out' '$err'"
[[ -x "$venv/bin/python" && "$(<"$venv/.pinwheel-requirements")" == "$want" ]] ||
  fail "a failed test install touched the venv"
[[ ! -e "$venv/.pinwheel-test-requirements" ]] || fail "a failed test install left its stamp"

run --bogus
[[ $rc == 2 && "$err" == *"unknown argument '--bogus'"* ]] ||
  fail "install-python-deps.sh --bogus: rc $rc, '$err'"
rc=0
bash "$src/third_party/install-deps.sh" --bogus >/dev/null 2>"$work/err" || rc=$?
[[ $rc == 2 && "$(<"$work/err")" == *"unknown argument '--bogus'"* ]] ||
  fail "install-deps.sh --bogus: rc $rc, '$(<"$work/err")'"
echo "install_python_deps_test: passed"
