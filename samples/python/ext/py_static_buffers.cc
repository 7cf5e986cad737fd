#include "samples/python/ext/py_static_buffers.h"

#include <cstddef>
#include <cstdint>
#include <dlpack/dlpack.h>
#include <nanobind/stl/string.h>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/loader_builder.h"
#include "samples/python/ext/py_datasets.h"
#include "samples/python/ext/py_images.h"

namespace pinwheel::python {
namespace {

using namespace nb::literals;

[[noreturn]] void Refuse(size_t i, const std::string& why) {
  throw StatusError(absl::InvalidArgumentError(
      absl::StrCat("static_device_buffers[", i, "]: ", why)));
}

std::string DeviceName(const DLDevice& d) {
  switch (d.device_type) {
    case kDLCPU:
      return "the host";
    case kDLCUDA:
      return absl::StrCat("cuda:", d.device_id);
    case kDLCUDAHost:
      return "page-locked host memory (kDLCUDAHost)";
    case kDLCUDAManaged:
      return absl::StrCat("CUDA managed memory (device ", d.device_id, ")");
    default:
      return absl::StrCat("DLPack device type ", d.device_type);
  }
}

// Returns `t`'s bytes when it is C-contiguous, or -1.
int64_t ContiguousBytes(const DLTensor& t) {
  if (t.dtype.lanes != 1 || t.dtype.bits % 8 != 0) return -1;
  int64_t elements = 1;
  for (int d = 0; d < t.ndim; ++d) elements *= t.shape[d];
  if (t.strides != nullptr && elements > 0) {
    int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (t.shape[d] != 1 && t.strides[d] != expected) return -1;
      expected *= t.shape[d];
    }
  }
  return elements * (t.dtype.bits / 8);
}

}  // namespace

std::vector<StaticDeviceBuffer> StaticBuffersFromPy(nb::handle buffers,
                                                    const Device& device) {
  if (!PySequence_Check(buffers.ptr()) || nb::isinstance<nb::str>(buffers) ||
      nb::isinstance<nb::bytes>(buffers)) {
    throw StatusError(absl::InvalidArgumentError(absl::StrCat(
        "static_device_buffers: expected a list of tensors the caller owns "
        "(torch tensors, numpy arrays: objects with __dlpack__), got ",
        nb::type_name(buffers.type()).c_str())));
  }
  std::vector<StaticDeviceBuffer> out;
  const size_t n = nb::len(buffers);
  for (size_t i = 0; i < n; ++i) {
    nb::object buffer = buffers[i];
    if (!nb::hasattr(buffer, "__dlpack__")) {
      Refuse(i, absl::StrCat("a ", nb::type_name(buffer.type()).c_str(),
                             " has no __dlpack__; pass a torch tensor or a "
                             "numpy array"));
    }
    nb::object capsule;
    try {
      capsule = buffer.attr("__dlpack__")();
    } catch (nb::python_error& e) {
      Refuse(i, absl::StrCat("__dlpack__() raised: ", e.what()));
    }
    auto* managed = static_cast<DLManagedTensor*>(
        PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (managed == nullptr) {
      PyErr_Clear();
      Refuse(i, "__dlpack__() returned no \"dltensor\" capsule");
    }
    // The capsule is not consumed: its own destructor lets the tensor go.
    // `buffer` (kept alive by the Python Loader) owns the memory.
    const DLTensor& t = managed->dl_tensor;
    const bool on_device = device.is_cuda()
                               ? ((t.device.device_type == kDLCUDA ||
                                   t.device.device_type == kDLCUDAManaged) &&
                                  t.device.device_id == device.ordinal())
                               : t.device.device_type == kDLCPU;
    if (!on_device) {
      Refuse(i,
             absl::StrCat("a tensor on ", DeviceName(t.device),
                          ", but the loader's device is ", device.ToString()));
    }
    const int64_t bytes = ContiguousBytes(t);
    if (bytes < 0) {
      Refuse(i, "not C-contiguous (batches are written as one block)");
    }
    out.push_back({static_cast<std::byte*>(t.data) + t.byte_offset,
                   static_cast<size_t>(bytes)});
  }
  return out;
}

void BindStaticBuffers(nb::module_& m) {
  m.def(
      "_static_buffer_bytes",
      [](const DatasetHandle& dataset, int64_t batch_size,
         const DeviceTransformHandle* device_transform, bool pad_last_batch,
         const std::string& valid_field) {
        LoaderBuilder builder = dataset.iterable != nullptr
                                    ? LoaderBuilder(dataset.iterable)
                                    : LoaderBuilder(dataset.dataset);
        builder.batch_size(batch_size)
            .pad_last_batch(pad_last_batch, valid_field);
        if (device_transform != nullptr) {
          builder.device_transform(device_transform->transform);
        }
        return ValueOrThrow(builder.device_buffer_bytes());
      },
      "dataset"_a, "batch_size"_a, "device_transform"_a.none() = nb::none(),
      "pad_last_batch"_a = false, "valid_field"_a = "valid",
      "LoaderBuilder::device_buffer_bytes(): the bytes each static device "
      "buffer must hold at least.");
}

}  // namespace pinwheel::python
