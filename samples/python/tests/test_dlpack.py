"""output="dlpack" (issue 18 item 12): a batch's fields implement the DLPack
protocol (__dlpack__, __dlpack_device__), so np.from_dlpack takes them; bare
capsules, as before, were refused by every from_dlpack."""
import numpy as np
import pytest

from conftest import host_loader


def test_np_from_dlpack_takes_a_field_and_sees_the_batch(array_dataset, images, labels):
    with host_loader(array_dataset, batch_size=10, output="dlpack") as loader:
        batch = loader.next()
        image = np.from_dlpack(batch["image"])
        label = np.from_dlpack(batch["label"])
        np.testing.assert_array_equal(image, images[:10])
        np.testing.assert_array_equal(label, labels[:10])
        assert image.dtype == np.uint8 and image.shape == (10, 3, 8, 8)


def test_each_export_is_a_new_capsule_so_two_consumers_can_take_it(array_dataset, labels):
    with host_loader(array_dataset, batch_size=10, output="dlpack") as loader:
        field = loader.next()["label"]
        first = np.from_dlpack(field)
        second = np.from_dlpack(field)
        np.testing.assert_array_equal(first, second)
        np.testing.assert_array_equal(first, labels[:10])


def test_dlpack_device_is_the_host_on_the_host_backend(array_dataset):
    with host_loader(array_dataset, batch_size=10, output="dlpack") as loader:
        field = loader.next()["image"]
        assert field.__dlpack_device__() == (1, 0)  # kDLCPU
        assert type(field.__dlpack__()).__name__ == "PyCapsule"


def test_an_array_outlives_the_batch_and_the_loader(array_dataset, labels):
    with host_loader(array_dataset, batch_size=10, output="dlpack") as loader:
        label = np.from_dlpack(loader.next()["label"])
    # The loader is closed; the array still holds its share of the batch.
    np.testing.assert_array_equal(label, labels[:10])


def test_refuses_another_device_or_a_copy_naming_it(array_dataset):
    with host_loader(array_dataset, batch_size=10, output="dlpack") as loader:
        field = loader.next()["image"]
        with pytest.raises(BufferError, match="dl_device"):
            field.__dlpack__(dl_device=(2, 0))
        with pytest.raises(BufferError, match="copy=True"):
            field.__dlpack__(copy=True)
