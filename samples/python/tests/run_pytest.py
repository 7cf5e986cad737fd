"""Runs the pytest suite for ctest (`python_tests`): exits 77 (ctest's
Skipped) when numpy or pytest is missing for this interpreter, and 1 when
pytest collected no test, so that a suite that ran nothing never passes."""
import importlib.util
import sys

missing = [m for m in ("numpy", "pytest") if importlib.util.find_spec(m) is None]
if missing:
    print(f"python_tests skipped: {', '.join(missing)} not installed for {sys.executable} "
          "(run third_party/install-deps.sh)")
    sys.exit(77)

import pytest  # noqa: E402

code = pytest.main(sys.argv[1:])
sys.exit(1 if code == pytest.ExitCode.NO_TESTS_COLLECTED else int(code))
