#!/usr/bin/env bash
# PINWHEEL_REQUIRE_TORCH=1 (CI's, set by .ci/run) when the venv itself is
# missing: python_tests, Skipped without the variable, fails with it, both
# where CMake skipped the package (samples/python/python_skipped.cmake) and
# where the interpreter lacks numpy or pytest (samples/python/tests/run_pytest.py).
# Usage: require_torch_test.sh SOURCE_DIR CMAKE_COMMAND
set -euo pipefail
src="$1"
cmake="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# check NAME EXPECTED_RC EXPECTED_OUTPUT COMMAND...: runs COMMAND.
check() {
  local name="$1" want_rc="$2" want_out="$3" rc=0
  shift 3
  "$@" >"$work/out" 2>&1 || rc=$?
  [[ $rc == "$want_rc" && "$(<"$work/out")" == *"$want_out"* ]] ||
    fail "$name: rc $rc (want $want_rc), output: $(<"$work/out")"
}

skipped=("$cmake" "-DREASON=no venv (a test)" -P "$src/samples/python/python_skipped.cmake")
check "package skipped" 0 "python_tests skipped: no venv (a test)" \
  env -u PINWHEEL_REQUIRE_TORCH "${skipped[@]}"
check "package skipped, PINWHEEL_REQUIRE_TORCH=1" 1 \
  "PINWHEEL_REQUIRE_TORCH=1 but the Python package was not built: no venv (a test)" \
  env PINWHEEL_REQUIRE_TORCH=1 "${skipped[@]}"
grep -q "python_tests skipped" "$work/out" && fail "the failure would match the skip expression"

if command -v python3 >/dev/null; then
  # An interpreter without numpy and pytest: -S leaves site-packages out
  # (-I the environment and the user's site).
  runner=(python3 -I -S "$src/samples/python/tests/run_pytest.py")
  check "numpy missing" 77 "python_tests skipped: numpy" env -u PINWHEEL_REQUIRE_TORCH "${runner[@]}"
  check "numpy missing, PINWHEEL_REQUIRE_TORCH=1" 1 \
    "python_tests failed: PINWHEEL_REQUIRE_TORCH=1 but numpy" env PINWHEEL_REQUIRE_TORCH=1 "${runner[@]}"
fi
echo "require_torch_test: passed"
