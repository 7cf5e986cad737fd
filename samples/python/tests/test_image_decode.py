"""The decode option of pinwheel.ImageFolder and pinwheel.TarShards
(decode = "cpu" | "gpu" | "auto", issue 20 item 6): one loop for either
path (image bf16 [batch, 3, size, size] + label), a clear refusal of
decode="gpu" where it cannot run, auto falling back to cpu and saying why,
and every argument checked. The GPU case runs on a machine with a GPU and
nvJPEG (and torch, to read the device batches), and skips elsewhere."""
import numpy as np
import pytest

import pinwheel
from conftest import host_loader
from test_images import all_batches, write_folder, write_shards


def one_epoch(loader):
    """The training loop's body, the same for every decode path."""
    images, labels = [], []
    for batch in loader:
        images.append(np.array(batch["image"]))
        labels.append(np.array(batch["label"]))
    return np.concatenate(images), np.concatenate(labels)


@pytest.mark.parametrize("decode", ["cpu", "auto"])
def test_decode_delivers_normalised_bf16_chw_on_the_host(tmp_path, decode):
    root = write_folder(tmp_path)
    kwargs = dict(batch_size=4, shuffle=True, seed=9, num_workers=2)
    with host_loader(pinwheel.ImageFolder(root, size=20, decode=decode), **kwargs) as loader:
        assert loader.fields == [("image", "bf16", [4, 3, 20, 20]), ("label", "i64", [4])]
        assert not loader.gpu_decode
        assert loader.decode_report.startswith("cpu (decode = " + decode)
        if decode == "auto":
            assert "no GPU" in loader.decode_report or "nvJPEG" in loader.decode_report
        images, labels = one_epoch(loader)
    # The same batches as normalising the u8 pixels with NormalizeImage.
    normalize = pinwheel.NormalizeImage()
    with host_loader(pinwheel.ImageFolder(root, size=20), device_transform=normalize,
                     **kwargs) as loader:
        expected, expected_labels = all_batches(loader)
    np.testing.assert_array_equal(labels, expected_labels)
    assert images.shape == expected.shape == (12, 3, 20, 20)

    def widen(bits):
        return (bits.astype(np.uint32) << 16).view(np.float32)

    # The pipeline's mean and std are 255 * (0.485, ...) in float32,
    # NormalizeImage's ImageNet constants the same to an ulp or so.
    np.testing.assert_allclose(widen(images), widen(expected), rtol=0, atol=2e-2)


def test_tar_shards_take_decode_too(tmp_path):
    shards = write_shards(tmp_path)
    with host_loader(pinwheel.TarShards(shards, size=12, seed=3, decode="cpu"),
                     batch_size=3) as loader:
        assert loader.fields == [("image", "bf16", [3, 3, 12, 12]), ("label", "i64", [3])]
        images, labels = one_epoch(loader)
    assert sorted(labels.tolist()) == [s * 100 + k for s in range(2) for k in range(6)]
    assert images.shape == (12, 3, 12, 12)


def test_decode_gpu_where_it_cannot_run_is_refused_saying_why(tmp_path):
    root = write_folder(tmp_path)
    data = pinwheel.ImageFolder(root, size=20, decode="gpu")
    with pytest.raises(pinwheel.FailedPreconditionError, match=r"decode = gpu: .*(GPU|nvJPEG)"):
        host_loader(data, batch_size=4)
    shards = write_shards(tmp_path)
    with pytest.raises(pinwheel.FailedPreconditionError, match="decode = gpu"):
        host_loader(pinwheel.TarShards(shards, size=12, decode="gpu"), batch_size=3)


@pytest.mark.parametrize("call, error, message", [
    (lambda r: pinwheel.ImageFolder(r, decode=1), TypeError, "decode"),
    (lambda r: pinwheel.ImageFolder(r, decode="nvjpeg"), pinwheel.InvalidArgumentError,
     "decode = 'nvjpeg'"),
    (lambda r: pinwheel.TarShards(["x.tar"], decode="GPU"), pinwheel.InvalidArgumentError,
     "decode"),
    (lambda r: host_loader(pinwheel.ImageFolder(r, decode="cpu"),
                           device_transform=pinwheel.NormalizeImage()),
     pinwheel.InvalidArgumentError, "device_transform"),
])
def test_bad_decode_arguments_raise_naming_them(tmp_path, call, error, message):
    root = write_folder(tmp_path)
    with pytest.raises(error, match=message):
        call(root)


@pytest.mark.skipif(pinwheel.cuda_device_count() == 0, reason="needs a GPU and the CUDA backend")
def test_decode_gpu_matches_the_cpu_path_on_the_gpu(tmp_path):
    torch = pytest.importorskip("torch", reason="torch reads the device batches")
    root = write_folder(tmp_path, per_class=8)
    kwargs = dict(batch_size=8, shuffle=True, seed=5, num_workers=2, device="cuda",
                  output="torch")
    try:
        gpu = pinwheel.Loader(pinwheel.ImageFolder(root, size=32, decode="gpu"), **kwargs)
    except pinwheel.FailedPreconditionError as e:
        if "nvJPEG" in str(e):
            pytest.skip(f"this build has no nvJPEG: {e}")
        raise
    cpu = pinwheel.Loader(pinwheel.ImageFolder(root, size=32, decode="cpu"), **kwargs)
    assert gpu.gpu_decode and gpu.decode_report.startswith("gpu")
    assert gpu.fields == cpu.fields == [("image", "bf16", [8, 3, 32, 32]),
                                        ("label", "i64", [8])]
    epochs = []
    for loader in (cpu, gpu):
        images, labels = [], []
        for batch in loader:  # the same loop for both
            images.append(batch["image"].float().cpu())
            labels.append(batch["label"].cpu())
        epochs.append((torch.cat(images), torch.cat(labels)))
        loader.close()
    assert torch.equal(epochs[0][1], epochs[1][1])
    # The same crops; the decoders' IDCTs and the resize differ a little
    # (the C++ suite's GpuPixelsMatchTheCpuPathOnTheSameCrops_CUDA bounds).
    diff = (epochs[0][0] - epochs[1][0]).abs() * (0.229 * 255)
    assert diff.mean().item() <= 2.0
