"""samples/python/train_images.py, the convnet trained on a generated JPEG
folder through ImageFolder + NormalizeImage: the folder is generated
without torch; with torch (CPU) it learns the classes well above chance in
a few epochs, and its losses are the same with any num_workers. The torch
cases skip, saying why, without torch (CI has it: the README's test line
installs third_party/python-test-requirements.txt, and PINWHEEL_REQUIRE_TORCH=1
makes them fail there instead of skipping)."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

from conftest import import_torch

TRAIN = pathlib.Path(__file__).resolve().parent.parent / "train_images.py"


def run(*args):
    result = subprocess.run([sys.executable, str(TRAIN), *args], capture_output=True, text=True,
                            timeout=240, env=os.environ.copy())
    if result.returncode != 0:
        pytest.fail(f"train_images.py {' '.join(args)} failed ({result.returncode}):\n"
                    f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    return result.stdout


def test_generate_only_writes_an_image_folder_of_jpegs(tmp_path):
    root = tmp_path / "shapes"
    out = run("--root", str(root), "--classes", "3", "--per_class", "5", "--generate_only")
    assert "generated 15 JPEGs" in out
    assert sorted(os.listdir(root)) == ["c0", "c1", "c2"]
    for k in range(3):
        files = sorted(os.listdir(root / f"c{k}"))
        assert len(files) == 5
        assert (root / f"c{k}" / files[0]).read_bytes()[:2] == b"\xff\xd8"  # a JPEG
    import pinwheel

    assert len(pinwheel.ImageFolder(root, size=16)) == 15


def test_bad_arguments_are_refused_naming_them(tmp_path):
    result = subprocess.run([sys.executable, str(TRAIN), "--root", str(tmp_path / "x"),
                             "--classes", "9"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--classes 9" in result.stderr


def final(out):
    match = re.search(r"^final: loss (\S+) accuracy (\S+)$", out, re.M)
    assert match, out
    return float(match.group(1)), float(match.group(2))


def test_trains_above_chance_and_the_same_with_any_num_workers(tmp_path):
    import_torch("torch is not installed (the trainer needs it)")
    root = str(tmp_path / "shapes")
    common = ["--root", root, "--classes", "4", "--per_class", "32", "--epochs", "4",
              "--batch_size", "16", "--size", "32"]
    out0 = run(*common, "--num_workers", "0")
    out3 = run(*common, "--num_workers", "3")
    losses0 = re.findall(r"loss (\S+),", out0)
    assert len(losses0) == 4
    assert float(losses0[-1]) < float(losses0[0]), out0
    assert final(out0)[1] > 0.5, out0  # 4 classes: chance is 0.25
    assert final(out0) == final(out3), (out0, out3)
