"""The resume, launcher and iterable API is documented where users look:
help(pinwheel.Loader), the package's exports, and the generated stub."""
import ast
import os
import pathlib
import pydoc

import pinwheel


def test_help_of_loader_explains_state_dict_and_resume():
    text = pydoc.render_doc(pinwheel.Loader, renderer=pydoc.plaintext)
    for words in ("state_dict()", "load_state_dict", "resume", "Elastic",
                  "CheckpointMismatchError", "distributed", "worker_init"):
        assert words in text, words
    assert "torch.save" in pinwheel.Loader.state_dict.__doc__


def test_the_new_names_are_exported_and_documented():
    for name in ("IterableDataset", "LaunchEnvironment", "launch_environment",
                 "CheckpointError", "CheckpointMismatchError", "CorruptCheckpointError",
                 "InvalidCheckpointError"):
        assert name in pinwheel.__all__, name
        assert getattr(pinwheel, name).__doc__, name
    assert "save_state" in pinwheel.IterableDataset.__doc__
    assert "GIL" in pinwheel.IterableDataset.__doc__


def test_the_stub_declares_the_new_extension_api():
    stub = pathlib.Path(os.environ.get("PINWHEEL_STUB") or
                        pathlib.Path(pinwheel.__file__).with_name("_pinwheel.pyi"))
    tree = ast.parse(stub.read_text())
    declared = {node.name for node in tree.body
                if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert {"LaunchEnvironment", "launch_environment", "python_iterable_dataset",
            "_checkpoint_info"} <= declared
    loader = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_Loader")
    init = next(n for n in loader.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assert {"resume", "worker_init"} <= {a.arg for a in init.args.args + init.args.kwonlyargs}
    assert any(isinstance(n, ast.FunctionDef) and n.name == "_checkpoint" for n in loader.body)
