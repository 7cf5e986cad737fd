"""torch output: CPU tensors on the host backend wherever torch imports, and
on a GPU the hand-over on torch's current stream and the release rule
(cases skip, saying why, without torch or without a GPU; CI has torch and
no GPU: PINWHEEL_REQUIRE_TORCH=1 there makes a missing torch fail instead,
and samples/python/gpu_run.sh runs the GPU cases on the GPU machine)."""
import numpy as np
import pytest

import pinwheel
from conftest import import_torch

torch = import_torch("torch is not installed")
needs_gpu = pytest.mark.skipif(
    not (torch.cuda.is_available() and pinwheel.cuda_device_count() > 0),
    reason="needs a GPU and pinwheel's CUDA backend")


def test_output_defaults_to_torch_tensors_on_the_host(array_dataset, images):
    with pinwheel.Loader(array_dataset, batch_size=10, device="cpu") as loader:
        assert loader.output == "torch"
        batch = loader.next()
        assert isinstance(batch["image"], torch.Tensor)
        assert batch["image"].device.type == "cpu" and batch["image"].dtype == torch.uint8
        np.testing.assert_array_equal(batch["image"].numpy(), images[batch.indices])


@needs_gpu
def test_gpu_batches_are_cuda_tensors_holding_the_samples(array_dataset, images):
    with pinwheel.Loader(array_dataset, batch_size=16, shuffle=True, seed=2, num_workers=2,
                         device="cuda:0") as loader:
        assert loader.output == "torch" and loader.device == "cuda:0"
        for batch in loader:
            image = batch["image"]
            assert image.is_cuda and image.dtype == torch.uint8
            np.testing.assert_array_equal(image.cpu().numpy(), images[batch.indices])


@needs_gpu
def test_hand_over_on_a_side_stream_orders_the_copy_before_the_work(array_dataset, images):
    side = torch.cuda.Stream()
    sums, expected = [], []
    with torch.cuda.stream(side):
        with pinwheel.Loader(array_dataset, batch_size=10, num_workers=2,
                             device="cuda:0") as loader:
            for _ in range(3):  # epochs
                for batch in loader:
                    sums.append(batch["image"].sum(dtype=torch.int64))  # queued on `side`
                    expected.append(int(images[batch.indices].sum(dtype=np.int64)))
    torch.cuda.synchronize()
    assert [int(s) for s in sums] == expected


@needs_gpu
def test_buffer_is_reused_only_after_work_queued_before_the_release(array_dataset, images):
    # The work reading batch 0 is delayed on a side stream; the batch is
    # dropped at once and later batches cycle through both device buffers.
    # Its clone must still see batch 0's data: the reuse waited for it.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        with pinwheel.Loader(array_dataset, batch_size=10, num_workers=2, device_buffers=2,
                             device="cuda:0") as loader:
            first = loader.next()
            indices = first.indices
            torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time on `side`
            kept = first["image"].clone()
            del first
            for _ in range(8):
                batch = loader.next()
                del batch
    torch.cuda.synchronize()
    np.testing.assert_array_equal(kept.cpu().numpy(), images[indices])


@needs_gpu
def test_a_tensor_outliving_its_batch_keeps_its_data(array_dataset, images):
    with pinwheel.Loader(array_dataset, batch_size=10, num_workers=2, device_buffers=3,
                         device="cuda:0") as loader:
        first = loader.next()
        kept, indices = first["label"], first.indices
        first.release()
        for batch in loader:
            pass
        torch.cuda.synchronize()
        np.testing.assert_array_equal(kept.cpu().numpy(), np.asarray(indices))
