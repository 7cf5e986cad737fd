"""import pinwheel raises CUDA's hardware work queues to 32 unless the user
set CUDA_DEVICE_MAX_CONNECTIONS (issue 32; Note [hardware queues] in
transfer/jpeg/nvjpeg_decoder.h)."""
import os
import subprocess
import sys

_PRINT = ("import os, pinwheel; "
          "print(os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS'), pinwheel._cuda_connections_set)")


def _imported_with(value):
    env = dict(os.environ)
    env.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    if value is not None:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = value
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([sys.executable, "-c", _PRINT], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_unset_becomes_32():
    assert _imported_with(None) == ["32", "True"]


def test_the_users_value_is_kept():
    assert _imported_with("8") == ["8", "False"]
    assert _imported_with("1") == ["1", "False"]
