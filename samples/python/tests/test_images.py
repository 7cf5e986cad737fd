"""pinwheel.ImageFolder, pinwheel.TarShards (the C++ image datasets of
loader/image/) and pinwheel.NormalizeImage on the device stage, from Python:
decoded pixels and labels, augmentation independent of num_workers, bf16 CHW
batches equal to normalising the u8 batch, shards read once each, bad files
named, and every argument checked. The JPEGs are written with
pinwheel.encode_jpeg (no PIL needed)."""
import io
import os
import tarfile

import numpy as np
import pytest

import pinwheel
from conftest import host_loader, import_torch

COLOURS = {"red": (220, 30, 40), "green": (20, 200, 60), "blue": (30, 40, 210)}


def write_folder(root, per_class=4, seed=0):
    """root/<colour>/<i>.jpg: images of sizes around 60x45, flat colour
    with a little noise, so decoded pixels can be checked."""
    rng = np.random.default_rng(seed)
    for name, rgb in COLOURS.items():
        os.makedirs(root / name)
        for i in range(per_class):
            h, w = 40 + 3 * i, 60 - 2 * i
            pixels = np.clip(np.array(rgb) + rng.integers(-4, 5, size=(h, w, 3)), 0, 255)
            (root / name / f"{i}.jpg").write_bytes(pinwheel.encode_jpeg(pixels.astype(np.uint8)))
    return root


def textured(rng, h, w):
    return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def write_shards(root, shards=2, per_shard=6, seed=0):
    """WebDataset shards: <key>.jpg + <key>.cls; sample k of shard s has
    label s * 100 + k."""
    rng = np.random.default_rng(seed)
    paths = []
    for s in range(shards):
        path = root / f"shard-{s:03d}.tar"
        with tarfile.open(path, "w") as tar:
            for k in range(per_shard):
                for suffix, data in (("jpg", pinwheel.encode_jpeg(textured(rng, 30, 40))),
                                     ("cls", str(s * 100 + k).encode())):
                    info = tarfile.TarInfo(f"s{s}k{k:03d}.{suffix}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        paths.append(str(path))
    return paths


def all_batches(loader, field="image"):
    images, labels = [], []
    for batch in loader:
        images.append(np.array(batch[field]))
        labels.append(np.array(batch["label"]))
    return np.concatenate(images), np.concatenate(labels)


def test_image_folder_decodes_into_u8_hwc_with_sorted_class_labels(tmp_path):
    data = pinwheel.ImageFolder(write_folder(tmp_path), train=False, size=16)
    assert len(data) == 12
    assert data.classes == ["blue", "green", "red"]
    assert data.fields == [("image", "u8", [16, 16, 3]), ("label", "i64", [])]
    with host_loader(data, batch_size=5) as loader:
        images, labels = all_batches(loader)
    assert images.shape == (12, 16, 16, 3) and images.dtype == np.uint8
    assert labels.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    for image, label in zip(images, labels):
        expected = COLOURS[data.classes[label]]
        # a flat colour decodes to itself, within JPEG's error and the noise
        assert np.abs(image.reshape(-1, 3).mean(0) - expected).max() < 6


def test_train_augmentation_is_the_same_with_any_num_workers(tmp_path):
    root = tmp_path / "images"
    os.makedirs(root / "a")
    rng = np.random.default_rng(3)
    for i in range(10):
        (root / "a" / f"{i}.jpg").write_bytes(pinwheel.encode_jpeg(textured(rng, 48, 64)))
    runs = []
    for workers in (0, 3):
        data = pinwheel.ImageFolder(root, train=True, size=24)
        with host_loader(data, batch_size=4, shuffle=True, seed=5,
                         num_workers=workers) as loader:
            runs.append(all_batches(loader))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    # ... and training augments: another seed gives other crops
    data = pinwheel.ImageFolder(root, train=True, size=24)
    with host_loader(data, batch_size=4, shuffle=True, seed=6) as loader:
        other = all_batches(loader)
    order = np.argsort(runs[0][1], kind="stable"), np.argsort(other[1], kind="stable")
    assert not np.array_equal(runs[0][0][order[0]], other[0][order[1]])


def bf16_bits(values):
    """float32 -> bfloat16 bits, rounded to nearest even (as NormalizeImage)."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_normalize_image_delivers_chw_batches_of_the_normalised_u8_batch(tmp_path, dtype):
    root = write_folder(tmp_path)
    mean, std = pinwheel.IMAGENET_MEAN, pinwheel.IMAGENET_STD
    kwargs = dict(batch_size=4, shuffle=True, seed=9, num_workers=2)
    with host_loader(pinwheel.ImageFolder(root, size=20), **kwargs) as loader:
        raw, raw_labels = all_batches(loader)
    normalize = pinwheel.NormalizeImage(mean, std, dtype=dtype)
    with host_loader(pinwheel.ImageFolder(root, size=20), device_transform=normalize,
                     **kwargs) as loader:
        out_dtype = "bf16" if dtype == "bf16" else "f32"
        assert loader.fields == [("image", out_dtype, [4, 3, 20, 20]), ("label", "i64", [4])]
        normalised, labels = all_batches(loader)
    np.testing.assert_array_equal(labels, raw_labels)
    chw = raw.transpose(0, 3, 1, 2).astype(np.float32)
    m = np.array(mean, np.float32).reshape(1, 3, 1, 1)
    inv = (np.float32(1) / np.array(std, np.float32)).reshape(1, 3, 1, 1)
    expected = ((chw - m) * inv).astype(np.float32)
    assert normalised.shape == (12, 3, 20, 20)
    if dtype == "bf16":  # numpy shows bf16 as its bits (uint16)
        assert normalised.dtype == np.uint16
        np.testing.assert_array_equal(normalised, bf16_bits(expected))
    else:
        assert normalised.dtype == np.float32
        np.testing.assert_array_equal(normalised, expected)


def test_normalize_image_of_the_wrong_channel_count_is_refused_by_the_loader(tmp_path):
    data = pinwheel.ImageFolder(write_folder(tmp_path), size=8)
    with pytest.raises(pinwheel.InvalidArgumentError, match="image"):
        host_loader(data, batch_size=2, device_transform=pinwheel.NormalizeImage([0.0], [1.0]))


def test_tar_shards_deliver_every_sample_once_over_workers(tmp_path):
    shards = write_shards(tmp_path, shards=4, per_shard=5)
    data = pinwheel.TarShards(shards, size=12, seed=3)
    with pytest.raises(TypeError, match="len"):
        len(data)
    with host_loader(data, batch_size=3, num_workers=2) as loader:
        images, labels = all_batches(loader)
    assert images.shape == (20, 12, 12, 3)
    assert sorted(labels.tolist()) == [s * 100 + k for s in range(4) for k in range(5)]
    # the same augmentation with another number of workers (keyed by the
    # sample's place in its shard)
    with host_loader(pinwheel.TarShards(shards, size=12, seed=3), batch_size=3,
                     num_workers=4) as loader:
        images4, labels4 = all_batches(loader)
    np.testing.assert_array_equal(images[np.argsort(labels)], images4[np.argsort(labels4)])


def shard_order(labels):
    """The shards in the order a one-stream epoch read them."""
    order = []
    for shard in (np.asarray(labels) // 100).tolist():
        if not order or order[-1] != shard:
            order.append(shard)
    return order


def test_tar_shards_shuffle_shards_reorders_the_files_every_epoch(tmp_path):
    shards = write_shards(tmp_path, shards=6, per_shard=2)
    every = sorted(s * 100 + k for s in range(6) for k in range(2))

    def epochs(**options):
        data = pinwheel.TarShards(shards, size=8, seed=5, **options)
        with host_loader(data, batch_size=4, num_workers=1) as loader:
            first = all_batches(loader)[1]
            second = all_batches(loader)[1]
        assert sorted(first.tolist()) == every and sorted(second.tolist()) == every
        return shard_order(first), shard_order(second)

    assert epochs() == ([0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5])
    first, second = epochs(shuffle_shards=True)
    assert sorted(first) == sorted(second) == [0, 1, 2, 3, 4, 5]
    assert first != second, "a new order each epoch"
    assert [0, 1, 2, 3, 4, 5] not in (first, second)
    assert epochs(shuffle_shards=True) == (first, second), "a function of (seed, epoch)"
    with pytest.raises(TypeError, match="shuffle_shards"):
        pinwheel.TarShards(shards, shuffle_shards=1)


def test_tar_shards_name_a_bad_member_or_skip_it(tmp_path):
    path = tmp_path / "bad.tar"
    with tarfile.open(path, "w") as tar:
        for name, data in (("a.jpg", pinwheel.encode_jpeg(textured(np.random.default_rng(1),
                                                                     20, 20))),
                           ("a.cls", b"1"), ("b.jpg", b"not a jpeg"), ("b.cls", b"2")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with host_loader(pinwheel.TarShards([path], size=8), batch_size=1) as loader:
        with pytest.raises(pinwheel.Error, match="b.jpg"):
            all_batches(loader)
    with host_loader(pinwheel.TarShards([path], size=8, skip_bad_samples=True),
                     batch_size=1) as loader:
        _, labels = all_batches(loader)
    assert labels.tolist() == [1]


def test_a_file_that_is_not_a_jpeg_is_named_or_skipped_and_counted(tmp_path):
    root = write_folder(tmp_path, per_class=2)
    (root / "red" / "broken.jpg").write_bytes(b"\x89PNG\r\n\x1a\n not a jpeg")
    data = pinwheel.ImageFolder(root, size=8)
    with host_loader(data, batch_size=7) as loader:
        with pytest.raises(pinwheel.Error, match="broken.jpg"):
            all_batches(loader)
    with host_loader(data, batch_size=7, on_error="skip") as loader:
        images, _ = all_batches(loader)
        assert loader.stats()["samples_skipped"] == 1
    assert len(images) == 6


def test_a_missing_root_is_not_found_naming_it(tmp_path):
    with pytest.raises(pinwheel.NotFoundError, match="nowhere"):
        pinwheel.ImageFolder(tmp_path / "nowhere")
    with pytest.raises(pinwheel.Error, match="nowhere.tar"):
        pinwheel.TarShards([tmp_path / "nowhere.tar"])


@pytest.mark.parametrize("call, error, message", [
    (lambda r: pinwheel.ImageFolder(3), TypeError, "root"),
    (lambda r: pinwheel.ImageFolder(r, train="yes"), TypeError, "train"),
    (lambda r: pinwheel.ImageFolder(r, size=2.5), TypeError, "size"),
    (lambda r: pinwheel.ImageFolder(r, size=0), pinwheel.InvalidArgumentError, "size"),
    (lambda r: pinwheel.ImageFolder(r, size=64, train=False, resize_size=32),
     pinwheel.InvalidArgumentError, "resize_size"),
    (lambda r: pinwheel.ImageFolder(r, scale=(0.5, 0.1)), pinwheel.InvalidArgumentError,
     "scale"),
    (lambda r: pinwheel.ImageFolder(r, scale=(0.5, 2)), pinwheel.InvalidArgumentError, "scale"),
    (lambda r: pinwheel.ImageFolder(r, scale=0.5), TypeError, "scale"),
    (lambda r: pinwheel.ImageFolder(r, ratio=(0, 1)), pinwheel.InvalidArgumentError, "ratio"),
    (lambda r: pinwheel.ImageFolder(r, flip_probability=1.5), pinwheel.InvalidArgumentError,
     "flip_probability"),
    (lambda r: pinwheel.ImageFolder(r, flip_probability="half"), TypeError, "flip_probability"),
    (lambda r: pinwheel.TarShards("one.tar"), TypeError, "shards"),
    (lambda r: pinwheel.TarShards([]), pinwheel.InvalidArgumentError, "shards"),
    (lambda r: pinwheel.TarShards([3]), TypeError, r"shards\[0\]"),
    (lambda r: pinwheel.TarShards(["x.tar"], seed=-1), pinwheel.InvalidArgumentError, "seed"),
    (lambda r: pinwheel.TarShards(["x.tar"], seed="7"), TypeError, "seed"),
    (lambda r: pinwheel.TarShards(["x.tar"], skip_bad_samples=1), TypeError,
     "skip_bad_samples"),
    (lambda r: pinwheel.TarShards(["x.tar"], size=-3), pinwheel.InvalidArgumentError, "size"),
    (lambda r: pinwheel.NormalizeImage("abc"), TypeError, "mean"),
    (lambda r: pinwheel.NormalizeImage([1, 2, 3], [1, 2]), pinwheel.InvalidArgumentError,
     "std"),
    (lambda r: pinwheel.NormalizeImage([1, 2, 3], [1, 0, 2]), pinwheel.InvalidArgumentError,
     "std"),
    (lambda r: pinwheel.NormalizeImage(dtype="int8"), pinwheel.InvalidArgumentError, "dtype"),
    (lambda r: pinwheel.NormalizeImage(input_layout="NHWC"), pinwheel.InvalidArgumentError,
     "input_layout"),
    (lambda r: pinwheel.NormalizeImage(field=1), TypeError, "field"),
    (lambda r: pinwheel.Loader(pinwheel.ImageFolder(r), device_transform="normalize"),
     TypeError, "device_transform"),
    (lambda r: pinwheel.encode_jpeg(np.zeros((4, 4, 3), np.float32)), TypeError, "uint8"),
    (lambda r: pinwheel.encode_jpeg(np.zeros((4, 4, 3), np.uint8), quality=0),
     pinwheel.InvalidArgumentError, "quality"),
    (lambda r: pinwheel.encode_jpeg(np.zeros((4, 4, 2), np.uint8)),
     pinwheel.InvalidArgumentError, "pixels"),
])
def test_every_argument_is_checked_and_named(tmp_path, call, error, message):
    root = write_folder(tmp_path, per_class=1)
    with pytest.raises(error, match=message):
        call(root)


def test_torch_output_is_bf16_chw_tensors(tmp_path):
    torch = import_torch("torch is not installed")
    data = pinwheel.ImageFolder(write_folder(tmp_path), size=16)
    with pinwheel.Loader(data, batch_size=4, device="cpu", output="torch",
                         device_transform=pinwheel.NormalizeImage()) as loader:
        batch = next(iter(loader))
        image = batch["image"]
        assert image.dtype == torch.bfloat16 and tuple(image.shape) == (4, 3, 16, 16)
        assert batch["label"].dtype == torch.int64


def test_an_image_folder_resumed_mid_epoch_delivers_the_same_augmented_batches(tmp_path):
    root = write_folder(tmp_path, per_class=5)
    kwargs = dict(batch_size=3, shuffle=True, seed=4, num_workers=2)
    with host_loader(pinwheel.ImageFolder(root, size=16), **kwargs) as loader:
        whole = [(np.array(b["image"]), np.array(b["label"])) for b in loader]
    with host_loader(pinwheel.ImageFolder(root, size=16), **kwargs) as loader:
        it = iter(loader)
        for _ in range(2):
            next(it)
        state = loader.state_dict()
    # another number of workers: the crops depend on (seed, epoch, index) only
    with host_loader(pinwheel.ImageFolder(root, size=16), resume=state,
                     **dict(kwargs, num_workers=3)) as loader:
        rest = [(np.array(b["image"]), np.array(b["label"])) for b in loader]
    assert len(rest) == len(whole) - 2
    for (image, label), (want_image, want_label) in zip(rest, whole[2:]):
        np.testing.assert_array_equal(label, want_label)
        np.testing.assert_array_equal(image, want_image)


def test_tar_shards_resumed_deliver_each_remaining_sample_once_with_its_crop(tmp_path):
    shards = write_shards(tmp_path, shards=2, per_shard=7)
    kwargs = dict(batch_size=2, num_workers=2)
    with host_loader(pinwheel.TarShards(shards, size=12, seed=1), **kwargs) as loader:
        images, labels = all_batches(loader)
    whole = dict(zip(labels.tolist(), images))
    seen = {}
    with host_loader(pinwheel.TarShards(shards, size=12, seed=1), **kwargs) as loader:
        it = iter(loader)
        for _ in range(3):
            batch = next(it)
            seen.update(zip(np.array(batch["label"]).tolist(), np.array(batch["image"])))
        state = loader.state_dict()
    with host_loader(pinwheel.TarShards(shards, size=12, seed=1), resume=state,
                     **kwargs) as loader:
        images, labels = all_batches(loader)
    assert not set(labels.tolist()) & set(seen)
    seen.update(zip(labels.tolist(), images))
    assert sorted(seen) == sorted(whole)
    for label, image in seen.items():
        np.testing.assert_array_equal(image, whole[label])


def test_non_utf8_class_and_file_names_never_raise_unicode_errors(tmp_path):
    # Issue 35, item 6: a class folder or file whose name is not UTF-8 made
    # .classes and the error text raise UnicodeDecodeError, which
    # `except pinwheel.Error` does not catch.
    root = tmp_path / "root"
    write_folder(root, per_class=1)
    raw_root = os.fsencode(root)
    latin = raw_root + b"/caf\xe9"  # Latin-1 e-acute: not UTF-8
    os.mkdir(latin)
    with open(latin + b"/ok.jpg", "wb") as f:
        f.write(pinwheel.encode_jpeg(np.zeros((8, 8, 3), np.uint8)))
    with open(latin + b"/\xff broken.jpg", "wb") as f:
        f.write(b"\xff\xd8\xff garbage")
    data = pinwheel.ImageFolder(root, size=8)
    # The names as os.fsdecode gives them: os.fsencode gets the bytes back.
    assert os.fsdecode(b"caf\xe9") in data.classes
    assert [os.fsencode(c) for c in data.classes] == sorted(
        [b"blue", b"caf\xe9", b"green", b"red"])
    with host_loader(data, batch_size=5) as loader:
        with pytest.raises(pinwheel.DataLossError) as caught:
            all_batches(loader)
    message = str(caught.value)
    assert "broken.jpg" in message and "caf\\xe9" in message
    message.encode("utf-8")  # printable: no lone surrogate in the text
