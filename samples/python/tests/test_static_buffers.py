"""Loader(static_device_buffers=...): batches land in buffers the caller
owns. The host cases use numpy arrays (no torch needed); the torch cases
(CPU tensors, and a CUDA graph per buffer on a GPU) skip without torch."""
import gc

import numpy as np
import pytest

import pinwheel
from conftest import host_loader


def aligned_buffer(nbytes, alignment=256, offset=0):
    """A writable uint8 array of nbytes at an address `offset` past a
    multiple of `alignment` (it keeps its base alive)."""
    raw = np.zeros(nbytes + 2 * alignment, np.uint8)
    start = (-raw.ctypes.data) % alignment + offset
    return raw[start:start + nbytes]


def address(array):
    return array.__array_interface__["data"][0]


def test_static_buffer_bytes_is_the_batch_layout(array_dataset):
    n = pinwheel.static_buffer_bytes(array_dataset, 10)
    # image u8[3, 8, 8] × 10 = 1920 bytes, then label i64 × 10 at a 256-byte
    # aligned offset (2048); the slot rounded up to 256 bytes: 2304.
    assert n == 2048 + 256
    assert pinwheel.static_buffer_bytes(array_dataset, 10, pad_last_batch=True) > n
    with pytest.raises(pinwheel.InvalidArgumentError, match="batch_size"):
        pinwheel.static_buffer_bytes(array_dataset, 0)


def test_every_batch_lands_in_one_of_the_callers_buffers(array_dataset, images, labels):
    n = pinwheel.static_buffer_bytes(array_dataset, 10)
    buffers = [aligned_buffer(n) for _ in range(3)]
    used = set()
    seen = []
    with host_loader(array_dataset, batch_size=10, shuffle=True, seed=4, num_workers=2,
                     static_device_buffers=buffers) as loader:
        assert loader.stats()["device_bytes"] == 0  # none of the loader's own
        for batch in loader:
            i = batch.buffer_index
            assert 0 <= i < 3
            used.add(i)
            image, label = batch["image"], batch["label"]
            assert address(image) == address(buffers[i])
            assert address(buffers[i]) <= address(label) < address(buffers[i]) + n
            np.testing.assert_array_equal(image, images[batch.indices])
            np.testing.assert_array_equal(label, labels[batch.indices])
            # The bytes are in the caller's array itself.
            np.testing.assert_array_equal(buffers[i][:image.nbytes],
                                          images[batch.indices].reshape(-1))
            seen.extend(batch.indices)
            del image, label
    assert sorted(seen) == list(range(100))
    assert len(used) >= 2


def test_a_held_batch_keeps_its_buffer(array_dataset, images):
    n = pinwheel.static_buffer_bytes(array_dataset, 10)
    buffers = [aligned_buffer(n) for _ in range(2)]
    with host_loader(array_dataset, batch_size=10, num_workers=1,
                     static_device_buffers=buffers) as loader:
        first = loader.next()
        kept = first.buffer_index
        for _ in range(5):
            batch = loader.next()
            assert batch.buffer_index == 1 - kept
            batch.release()
        np.testing.assert_array_equal(first["image"], images[first.indices])
        first.release()
        first.release()  # idempotent: the buffer is given back once
        gc.collect()
        a, b = loader.next(), loader.next()
        assert {a.buffer_index, b.buffer_index} == {0, 1}
        with pytest.raises(pinwheel.FailedPreconditionError, match="device buffers"):
            loader.next()


def test_device_buffers_defaults_to_their_count_and_must_match(array_dataset):
    n = pinwheel.static_buffer_bytes(array_dataset, 10)
    buffers = [aligned_buffer(n) for _ in range(2)]
    with host_loader(array_dataset, batch_size=10, static_device_buffers=buffers) as loader:
        held = [loader.next(), loader.next()]
        with pytest.raises(pinwheel.FailedPreconditionError, match="holds all 2 device buffers"):
            loader.next()
        del held
    with pytest.raises(pinwheel.InvalidArgumentError,
                       match="device_buffers.*must equal the number of static_device_buffers"):
        host_loader(array_dataset, batch_size=10, device_buffers=3,
                    static_device_buffers=buffers)


@pytest.mark.parametrize("make, message", [
    (lambda n: [aligned_buffer(n), aligned_buffer(n - 1)],
     r"static device buffer 1 of 2 .*too small: each batch needs"),
    (lambda n: [aligned_buffer(n), aligned_buffer(n, offset=8)],
     r"static device buffer 1 of 2 .*not aligned to 256"),
    (lambda n: [aligned_buffer(n)], r"static_device_buffers: 1 buffers: must be 2\.\.64"),
    (lambda n: [aligned_buffer(n)] * 65, r"static_device_buffers: 65 buffers"),
    (lambda n: [aligned_buffer(n), 7], r"static_device_buffers\[1\]: a int has no __dlpack__"),
    (lambda n: [aligned_buffer(n), aligned_buffer(2 * n)[::2]],
     r"static_device_buffers\[1\]: not C-contiguous"),
    (lambda n: "not a list", r"static_device_buffers: expected a list"),
])
def test_a_bad_buffer_is_refused_naming_it(array_dataset, make, message):
    n = pinwheel.static_buffer_bytes(array_dataset, 10)
    buffers = make(n)
    with pytest.raises(pinwheel.InvalidArgumentError, match=message):
        host_loader(array_dataset, batch_size=10, static_device_buffers=buffers)


def test_the_same_buffer_twice_is_refused(array_dataset):
    n = pinwheel.static_buffer_bytes(array_dataset, 10)
    one = aligned_buffer(n)
    with pytest.raises(pinwheel.InvalidArgumentError,
                       match="static device buffer 1 of 2 .*overlaps static device buffer 0"):
        host_loader(array_dataset, batch_size=10, static_device_buffers=[one, one])


def test_a_read_only_array_is_refused(array_dataset):
    n = pinwheel.static_buffer_bytes(array_dataset, 10)
    frozen = aligned_buffer(n)
    frozen.flags.writeable = False
    with pytest.raises(pinwheel.InvalidArgumentError, match=r"static_device_buffers\[0\]"):
        host_loader(array_dataset, batch_size=10,
                    static_device_buffers=[frozen, aligned_buffer(n)])


def test_one_loader_at_a_time_per_buffer(array_dataset, images):
    n = pinwheel.static_buffer_bytes(array_dataset, 10)
    buffers = [aligned_buffer(n) for _ in range(2)]
    with host_loader(array_dataset, batch_size=10, static_device_buffers=buffers):
        with pytest.raises(pinwheel.FailedPreconditionError, match="in use by another loader"):
            host_loader(array_dataset, batch_size=10, static_device_buffers=buffers)
    with host_loader(array_dataset, batch_size=10, static_device_buffers=buffers) as again:
        assert again.next() is not None


def test_load_state_dict_moves_the_buffers_to_the_new_loader(array_dataset, images):
    n = pinwheel.static_buffer_bytes(array_dataset, 10)
    buffers = [aligned_buffer(n) for _ in range(2)]
    with host_loader(array_dataset, batch_size=10, static_device_buffers=buffers) as loader:
        for _ in range(3):
            loader.next().release()
        state = loader.state_dict()
        after = loader.next()
        expected = list(after.indices)
        after.release()
        loader.load_state_dict(state)
        batch = loader.next()
        assert list(batch.indices) == expected
        np.testing.assert_array_equal(batch["image"], images[batch.indices])
        assert address(batch["image"]) == address(buffers[batch.buffer_index])


def test_cpu_torch_tensors_as_buffers(array_dataset, images):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    n = pinwheel.static_buffer_bytes(array_dataset, 10)
    raw = [torch.zeros(n + 512, dtype=torch.uint8) for _ in range(2)]
    buffers = [r[(-r.data_ptr()) % 256:][:n] for r in raw]
    with pinwheel.Loader(array_dataset, batch_size=10, device="cpu", output="torch",
                         static_device_buffers=buffers) as loader:
        for batch in loader:
            image = batch["image"]
            assert image.data_ptr() == buffers[batch.buffer_index].data_ptr()
            np.testing.assert_array_equal(image.numpy(), images[batch.indices])
            del image


def test_a_cuda_graph_per_buffer_replays_over_an_epoch(images):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available() or pinwheel.cuda_device_count() == 0:
        pytest.skip("no CUDA device (or torch without CUDA): the GPU case is not run here")
    values = (np.arange(640 * 64, dtype=np.int64) * 7 % 1000).astype(np.int32).reshape(640, 64)
    data = pinwheel.ArrayDataset({"x": values})
    n = pinwheel.static_buffer_bytes(data, 32)
    buffers = [torch.zeros(n, dtype=torch.uint8, device="cuda:0") for _ in range(3)]
    xs = [b[:32 * 64 * 4].view(torch.int32).view(32, 64) for b in buffers]
    total = torch.zeros((), dtype=torch.int64, device="cuda:0")
    last = torch.zeros((), dtype=torch.int64, device="cuda:0")
    # Warm up on a side stream, then capture one graph per buffer.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for x in xs:
            last.copy_(x.sum(dtype=torch.int64))
    torch.cuda.current_stream().wait_stream(side)
    graphs = []
    for x in xs:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            last.copy_(x.sum(dtype=torch.int64))
            total.add_(last)
        graphs.append(graph)
    total.zero_()
    expected = []
    got = []
    with pinwheel.Loader(data, batch_size=32, shuffle=True, seed=3, num_workers=2,
                         device="cuda:0", output="torch", static_device_buffers=buffers) as loader:
        for batch in loader:
            i = batch.buffer_index
            x = batch["x"]
            assert x.data_ptr() == xs[i].data_ptr()
            del x
            graphs[i].replay()
            got.append(int(last.item()))
            expected.append(int(values[batch.indices].astype(np.int64).sum()))
    assert got == expected
    assert int(total.item()) == sum(expected)
