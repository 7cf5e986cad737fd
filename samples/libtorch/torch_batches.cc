#include "samples/libtorch/torch_batches.h"

#include <ATen/DLConvertor.h>
#if PINWHEEL_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace pinwheel::torch_sample {

const torch::Tensor& TorchBatch::at(const std::string& name) const {
  for (const auto& [field, tensor] : fields) {
    if (field == name) return tensor;
  }
  TORCH_CHECK(false, "batch has no field '", name, "'");
}

Stream TorchConsumerStream(const Device& device) {
#if PINWHEEL_TORCH_CUDA
  if (device.is_cuda()) {
    cudaStream_t stream =
        c10::cuda::getCurrentCUDAStream(device.ordinal()).stream();
    return Stream::Borrow(device, stream);
  }
#endif
  return Stream::Borrow(device, nullptr);
}

torch::Device TorchDevice(const Device& device) {
  if (device.is_cuda()) {
    return torch::Device(torch::kCUDA,
                         static_cast<c10::DeviceIndex>(device.ordinal()));
  }
  return torch::Device(torch::kCPU);
}

absl::StatusOr<TorchBatch> WaitAndWrap(DeviceBatch& batch,
                                       const Stream& consumer) {
  if (absl::Status s = batch.WaitOn(consumer); !s.ok()) return s;
  TorchBatch out;
  out.fields.reserve(static_cast<size_t>(batch.num_fields()));
  for (int i = 0; i < batch.num_fields(); ++i) {
    absl::StatusOr<DLManagedTensor*> view = batch.ToDLPack(i);
    if (!view.ok()) return view.status();
    // fromDLPack takes ownership: the tensor's deleter calls the view's.
    out.fields.emplace_back(batch.field(i).name, at::fromDLPack(*view));
  }
  return out;
}

}  // namespace pinwheel::torch_sample
