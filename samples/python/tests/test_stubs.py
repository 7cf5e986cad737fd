"""Type stubs ship with the package: nanobind's stubgen writes
pinwheel/_pinwheel.pyi at build time, and the package is marked typed."""
import ast
import os
import pathlib

import pinwheel
import pinwheel._pinwheel as ext


def stub_path():
    return pathlib.Path(os.environ.get("PINWHEEL_STUB") or
                        pathlib.Path(pinwheel.__file__).with_name("_pinwheel.pyi"))


def test_stub_declares_every_public_name_of_the_extension():
    tree = ast.parse(stub_path().read_text())
    declared = {node.name for node in tree.body
                if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    public = {name for name in dir(ext) if not name.startswith("__")}
    assert public <= declared, public - declared
    assert {"Batch", "_Loader", "open_record_file", "python_dataset"} <= declared


def test_package_is_marked_typed():
    assert pathlib.Path(pinwheel.__file__).with_name("py.typed").exists()
