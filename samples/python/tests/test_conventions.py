"""What a PyTorch DataLoader user writes, and what pinwheel does with it
(issue 31 item 8): unpacking a Batch refuses and says how, a torch.device
is a device, DataLoader's argument names that pinwheel spells otherwise
name pinwheel's equivalent, and device_buffers defaults as in C++."""
import numpy as np
import pytest

import pinwheel
from conftest import host_loader, import_torch


def test_unpacking_a_batch_in_the_for_loop_raises_saying_how(array_dataset):
    with host_loader(array_dataset, batch_size=10) as loader:
        with pytest.raises(TypeError, match=r"image, label = batch\.values\(\)"):
            for image, label in loader:  # noqa: B007  (the names would be the keys)
                pass


def test_unpacking_a_batch_raises_naming_its_fields(array_dataset):
    with host_loader(array_dataset, batch_size=10) as loader:
        batch = loader.next()
        with pytest.raises(TypeError, match=r"\['image', 'label'\]"):
            image, label = batch
        with pytest.raises(TypeError, match="unpacking it would bind the field names"):
            first, *rest = batch


def test_the_values_unpack_in_field_order(array_dataset, images, labels):
    with host_loader(array_dataset, batch_size=10) as loader:
        for batch in loader:
            image, label = batch.values()
            np.testing.assert_array_equal(image, images[batch.indices])
            np.testing.assert_array_equal(label, labels[batch.indices])


def test_iterating_a_batch_otherwise_gives_its_field_names(array_dataset):
    with host_loader(array_dataset, batch_size=10) as loader:
        batch = loader.next()
        assert list(batch) == ["image", "label"]
        assert [name for name in batch] == ["image", "label"]
        assert sorted(dict(batch)) == ["image", "label"]
        assert {**batch}.keys() == {"image", "label"}


@pytest.mark.parametrize("name, equivalent", [
    ("prefetch_factor", "prefetch="),
    ("worker_init_fn", "worker_init="),
    ("collate_fn", "the dataset writes each sample into its place"),
    ("persistent_workers", "persist across epochs"),
    ("batch_sampler", "sampler="),
    ("generator", "seed="),
    ("multiprocessing_context", "threads of this process"),
    ("pin_memory_device", "device="),
])
def test_a_dataloader_argument_names_pinwheels_equivalent(array_dataset, name, equivalent):
    with pytest.raises(TypeError, match=f"Loader: {name} is torch DataLoader's; pinwheel's "
                                        f"equivalent is") as info:
        host_loader(array_dataset, batch_size=10, **{name: 2})
    assert equivalent in str(info.value)


def test_an_unknown_argument_is_the_usual_type_error(array_dataset):
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        host_loader(array_dataset, batchsize=10)


def test_the_dataloader_arguments_pinwheel_takes_keep_their_names(array_dataset):
    with host_loader(array_dataset, batch_size=10, shuffle=True, num_workers=2,
                     pin_memory=False, drop_last=True, timeout=30.0, in_order=True) as loader:
        assert len(loader) == 10


def test_device_buffers_defaults_to_the_cpp_default(array_dataset):
    # Two batches held: the C++ default (2) holds no third; one more buffer
    # given, the third comes.
    with host_loader(array_dataset, batch_size=10, num_workers=1) as loader:
        held = [loader.next(), loader.next()]
        with pytest.raises(pinwheel.FailedPreconditionError, match="device buffers"):
            loader.next()
        del held
    with host_loader(array_dataset, batch_size=10, num_workers=1, device_buffers=3) as loader:
        held = [loader.next(), loader.next(), loader.next()]
        assert [b.index for b in held] == [0, 1, 2]


def test_a_device_that_is_neither_a_str_nor_a_torch_device_is_a_type_error(array_dataset):
    with pytest.raises(TypeError, match=r"Loader: device must be a str \(.*\) or a torch\.device, "
                                        r"got 0 \(int\)"):
        host_loader(array_dataset, batch_size=10, device=0)


def test_a_torch_device_is_taken_as_its_string(array_dataset):
    torch = import_torch("torch is not installed: no torch.device to pass")
    with host_loader(array_dataset, batch_size=10, device=torch.device("cpu")) as loader:
        assert loader.device == "host"
        assert loader.next().size == 10
    if pinwheel.cuda_device_count() == 0:
        # Parsed as "cuda:0" is: a machine without a GPU refuses it by name.
        with pytest.raises(pinwheel.Error, match="cuda"):
            host_loader(array_dataset, batch_size=10, device=torch.device("cuda", 0),
                        output="dlpack")
