#include "samples/python/ext/py_dlpack.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

#include "transfer/stream.h"

namespace pinwheel::python {
namespace {

constexpr int kDLCPU = 1;
constexpr int kDLCUDA = 2;

[[noreturn]] void RaiseBufferError(const std::string& message) {
  PyErr_SetString(PyExc_BufferError, message.c_str());
  throw nb::python_error();
}

}  // namespace

nb::tuple DLPackTensor::DeviceTuple() const {
  const Device& device = batch_->device();
  return device.is_cuda() ? nb::make_tuple(kDLCUDA, device.ordinal())
                          : nb::make_tuple(kDLCPU, 0);
}

nb::object DLPackTensor::Export(nb::handle stream, nb::handle /*max_version*/,
                                nb::handle dl_device, nb::handle copy) {
  if (!dl_device.is_none() && !DeviceTuple().equal(dl_device)) {
    RaiseBufferError(absl::StrCat(
        "__dlpack__(dl_device=", nb::cast<std::string>(nb::repr(dl_device)),
        "): this tensor is on device ",
        nb::cast<std::string>(nb::repr(DeviceTuple())),
        " and pinwheel does not copy it elsewhere"));
  }
  if (!copy.is_none() && nb::cast<bool>(copy)) {
    RaiseBufferError(
        "__dlpack__(copy=True): pinwheel exports views of the batch only; "
        "copy the result instead (np.array(x), tensor.clone())");
  }
  const Device& device = batch_->device();
  if (device.is_cuda() && !stream.is_none()) {
    const int64_t handle = nb::cast<int64_t>(stream);
    // None, 0 and 1: the legacy default stream, which Loader.next() already
    // made wait for the copy; -1: the consumer synchronizes itself.
    if (handle != -1 && handle != 0 && handle != 1) {
      ThrowIfError(batch_->WaitOn(Stream::Borrow(
          device, reinterpret_cast<void*>(static_cast<uintptr_t>(handle)))));
    }
  }
  return export_capsule_();
}

void BindDLPack(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<DLPackTensor>(
      m, "DLPackTensor",
      "A batch field with output='dlpack': pass it to np.from_dlpack, "
      "torch.from_dlpack or any DLPack consumer.")
      .def("__dlpack__", &DLPackTensor::Export, nb::kw_only(),
           "stream"_a = nb::none(), "max_version"_a = nb::none(),
           "dl_device"_a = nb::none(), "copy"_a = nb::none(),
           "Exports a new DLPack capsule sharing the batch.")
      .def("__dlpack_device__", &DLPackTensor::DeviceTuple,
           "(device type, device id): (1, 0) host, (2, ordinal) CUDA.")
      .def("__repr__", [](const DLPackTensor& t) {
        return absl::StrCat("<pinwheel.DLPackTensor field ", t.field(), " on ",
                            nb::cast<std::string>(nb::repr(t.DeviceTuple())),
                            ">");
      });
}

}  // namespace pinwheel::python
