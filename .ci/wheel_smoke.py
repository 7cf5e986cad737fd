"""The wheel's smoke test (.ci/wheel-check.sh runs it in a fresh venv with
the build tree, the CUDA toolkit and Debian's Abseil, oneTBB and
libjpeg-turbo out of reach): it imports, says what it bundles, and runs a
loader over an array dataset and over JPEGs it writes."""
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pinwheel

info = pinwheel.build_info()
print("build_info:", info)
bundled = " ".join(info["bundled_libraries"])
for lib in ("libabsl_", "libtbb", "libturbojpeg", "libjpeg"):
    assert lib in bundled, f"the wheel bundles no {lib}*: {info['bundled_libraries']}"
if info["gpu_jpeg_decode"]:
    nvjpeg = info["nvjpeg_library"]
    assert nvjpeg and nvjpeg.startswith(sys.prefix), (
        f"libnvjpeg loaded from {nvjpeg}, not from this venv's nvidia-nvjpeg ({sys.prefix})")

# Note [one exported symbol] (samples/python/CMakeLists.txt): the repaired
# extension still exports its module init alone.
nm = shutil.which("nm")
if nm is None:
    exports = "exports not checked (no nm)"
else:
    listed = subprocess.run([nm, "-D", "--defined-only", pinwheel._pinwheel.__file__],
                            capture_output=True, text=True, check=True).stdout
    exported = [line.split()[-1] for line in listed.splitlines() if line.strip()]
    assert exported == ["PyInit__pinwheel"], f"the extension exports {exported[:10]}..."
    exports = "only PyInit__pinwheel exported"

images = np.arange(64 * 3 * 8 * 8, dtype=np.uint8).reshape(64, 3, 8, 8)
labels = np.arange(64, dtype=np.int64)
data = pinwheel.ArrayDataset({"image": images, "label": labels})
seen = []
with pinwheel.Loader(data, batch_size=16, shuffle=True, seed=1, num_workers=2,
                     device="cpu", output="numpy") as loader:
    for batch in loader:
        seen.extend(np.asarray(batch["label"]).tolist())
assert sorted(seen) == list(range(64)), seen

with tempfile.TemporaryDirectory() as root:
    for cls in ("a", "b"):
        (pathlib.Path(root) / cls).mkdir()
        for i in range(4):
            pixels = np.full((12, 16, 3), 40 * i, np.uint8)
            (pathlib.Path(root) / cls / f"{i}.jpg").write_bytes(pinwheel.encode_jpeg(pixels))
    folder = pinwheel.ImageFolder(root, train=False, size=8)
    with pinwheel.Loader(folder, batch_size=4, num_workers=2, device="cpu",
                         output="numpy") as loader:
        count = sum(len(np.asarray(batch["label"])) for batch in loader)
    assert count == 8, count
print(f"wheel smoke: imported, {exports}, 64 array samples and 8 decoded JPEGs loaded")
