// The hand-over from pinwheel to LibTorch: each field of a DeviceBatch as a
// torch::Tensor (at::fromDLPack, no copy), after making torch's current CUDA
// stream wait for the batch's copy (no host sync).
//
// Example:
//   Stream consumer = TorchConsumerStream(loader.device());
//   PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch, loader.Next());
//   PINWHEEL_ASSIGN_OR_RETURN(TorchBatch t, WaitAndWrap(*batch, consumer));
//   torch::Tensor loss = Step(t.at("image"), t.at("label"));  // queued on the
//   stream t = {};                                          // drop the views
//   first PINWHEEL_RETURN_IF_ERROR(batch->Release(consumer));
//
// The release rule: Release() on the same stream after the step has been
// queued (the buffer is reused only after that work has run). A view that
// outlives the release keeps the buffer from reuse, but work queued on it
// after the release is not fenced: drop the views (or clone() them) first.
#ifndef PINWHEEL_SAMPLES_LIBTORCH_TORCH_BATCHES_H_
#define PINWHEEL_SAMPLES_LIBTORCH_TORCH_BATCHES_H_

#include <string>
#include <torch/torch.h>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/stream.h"

namespace pinwheel::torch_sample {

// A batch's fields as tensors sharing the batch's device buffer.
// Thread-compatible.
struct TorchBatch {
  std::vector<std::pair<std::string, torch::Tensor>> fields;

  // Returns the tensor of field `name`. REQUIRES: the field exists.
  const torch::Tensor& at(const std::string& name) const;
};

// Returns the consumer stream for `device`: torch's current CUDA stream of
// that GPU, or the calling thread on the host backend. Borrowed: valid while
// torch's stream is (torch never destroys its streams).
Stream TorchConsumerStream(const Device& device);

// Returns the torch device batches of `device` live on.
torch::Device TorchDevice(const Device& device);

// Makes `consumer` wait for `batch` and wraps each field as a tensor.
absl::StatusOr<TorchBatch> WaitAndWrap(DeviceBatch& batch,
                                       const Stream& consumer);

}  // namespace pinwheel::torch_sample

#endif  // PINWHEEL_SAMPLES_LIBTORCH_TORCH_BATCHES_H_
