"""import pinwheel raises CUDA's hardware work queues to 32 unless the user
set CUDA_DEVICE_MAX_CONNECTIONS (issue 32; Note [hardware queues] in
transfer/jpeg/nvjpeg_decoder.h)."""
import os
import subprocess
import sys

_PRINT = ("import os, pinwheel; "
          "print(os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS'), pinwheel._cuda_connections_set)")

# A stand-in torch whose CUDA has started, imported before pinwheel.
_AFTER_TORCH = ("import sys, types, warnings; "
                "torch = types.ModuleType('torch'); "
                "torch.cuda = types.SimpleNamespace(is_initialized=lambda: True); "
                "sys.modules['torch'] = torch; "
                "warnings.simplefilter('error'); "
                "import pinwheel")


def _run(code, value=None):
    """Runs `code` in a fresh interpreter with CUDA_DEVICE_MAX_CONNECTIONS
    set to `value` (None: unset)."""
    env = dict(os.environ)
    env.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    if value is not None:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = value
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def _imported_with(value):
    """The variable and pinwheel._cuda_connections_set after import pinwheel."""
    done = _run(_PRINT, value)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_unset_becomes_32():
    assert _imported_with(None) == ["32", "True"]


def test_the_users_value_is_kept():
    assert _imported_with("8") == ["8", "False"]
    assert _imported_with("1") == ["1", "False"]


def test_after_torch_started_cuda_it_warns_and_sets_nothing():
    done = _run(_AFTER_TORCH)
    assert done.returncode != 0
    assert "RuntimeWarning" in done.stderr and "import pinwheel first" in done.stderr, done.stderr
    # Without turning the warning into an error: imported, the variable unset.
    done = _run(_AFTER_TORCH.replace("warnings.simplefilter('error'); ", "")
                + "; import os; print(os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS'),"
                " pinwheel._cuda_connections_set)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "False"]
