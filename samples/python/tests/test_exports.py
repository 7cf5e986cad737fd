"""The extension exports its module init and nothing else (Note [one
exported symbol] in samples/python/CMakeLists.txt): a symbol it exported
took the place of libstdc++'s own, and `import pinwheel, torch` aborted."""
import os
import shutil
import subprocess
import sys

import pytest

import pinwheel
from pinwheel import _pinwheel
from conftest import import_torch


def test_the_extension_exports_only_pyinit():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) not found: the extension's symbol table cannot be read")
    listed = subprocess.run([nm, "-D", "--defined-only", _pinwheel.__file__],
                            capture_output=True, text=True, check=True).stdout
    names = sorted(line.split()[-1] for line in listed.splitlines() if line.strip())
    assert names == ["PyInit__pinwheel"], (
        f"{_pinwheel.__file__} exports {len(names)} symbols, not only PyInit__pinwheel; "
        f"the first: {names[:10]}")


def test_pinwheel_imports_before_torch():
    import_torch("torch is not installed: the import order cannot be checked")
    code = "import pinwheel, torch; torch.zeros(2).sum(); print('imported both')"
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", os.path.dirname(os.path.dirname(pinwheel.__file__)))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0 and "imported both" in done.stdout, (
        f"exit {done.returncode}: {done.stderr[-2000:]}")
