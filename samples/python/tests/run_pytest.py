"""Runs the pytest suite for ctest (`python_tests`): exits 77 (ctest's
Skipped) when numpy or pytest is missing for this interpreter (1 under
PINWHEEL_REQUIRE_TORCH=1, CI's: the torch tests did not run), and 1 when
pytest collected no test, so that a suite that ran nothing never passes."""
import importlib.util
import os
import sys

missing = [m for m in ("numpy", "pytest") if importlib.util.find_spec(m) is None]
if missing and os.environ.get("PINWHEEL_REQUIRE_TORCH") == "1":
    print(f"python_tests failed: PINWHEEL_REQUIRE_TORCH=1 but {', '.join(missing)} not installed "
          f"for {sys.executable} (run third_party/install-deps.sh --tests)")
    sys.exit(1)
if missing:
    print(f"python_tests skipped: {', '.join(missing)} not installed for {sys.executable} "
          "(run third_party/install-deps.sh)")
    sys.exit(77)

import pytest  # noqa: E402

code = pytest.main(sys.argv[1:])
sys.exit(1 if code == pytest.ExitCode.NO_TESTS_COLLECTED else int(code))
