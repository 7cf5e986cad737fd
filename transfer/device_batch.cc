#include "transfer/device_batch.h"

#include <dlpack/dlpack.h>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "transfer/internal/batch_lease.h"

namespace pinwheel {
namespace {

DLDataType ToDLDataType(DType dtype) {
  const uint8_t bits = static_cast<uint8_t>(DTypeSize(dtype) * 8);
  switch (dtype) {
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return {kDLInt, bits, 1};
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return {kDLFloat, bits, 1};
    case DType::kBFloat16:
      return {kDLBfloat, bits, 1};
    case DType::kBool:  // DLPack 0.6 has no bool code: one byte unsigned
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return {kDLUInt, bits, 1};
  }
  return {kDLUInt, 8, 1};
}

// What a DLPack view owns: a share of the lease (the buffer stays put) and
// the shape array DLTensor points at.
struct DLPackContext {
  std::shared_ptr<internal::BatchLease> lease;
  std::vector<int64_t> shape;
  DLManagedTensor tensor;
};

// A host event never recorded: complete. ready() of a batch that never
// held one.
const Event& CompletedHostEvent() {
  static const std::shared_ptr<Event> kCompleted = [] {
    absl::StatusOr<std::shared_ptr<Event>> event =
        Event::Create(Device::Host());
    return event.ok() ? *std::move(event) : nullptr;  // host events cannot fail
  }();
  return *kCompleted;
}

}  // namespace

DeviceBatch::DeviceBatch() = default;
DeviceBatch::DeviceBatch(std::shared_ptr<internal::BatchLease> lease)
    : lease_(std::move(lease)),
      completed_(lease_ != nullptr ? lease_->completed : nullptr) {}
DeviceBatch::DeviceBatch(DeviceBatch&&) noexcept = default;

DeviceBatch& DeviceBatch::operator=(DeviceBatch&& other) noexcept {
  if (this != &other) {
    if (lease_ != nullptr) Release().IgnoreError();
    lease_ = std::move(other.lease_);
    completed_ = std::move(other.completed_);
  }
  return *this;
}

DeviceBatch::~DeviceBatch() {
  if (lease_ != nullptr) Release().IgnoreError();
}

const BatchInfo& DeviceBatch::info() const {
  static const BatchInfo kNone{.epoch = -1, .index = -1};
  return lease_ ? lease_->info : kNone;
}
int64_t DeviceBatch::epoch() const { return info().epoch; }
int64_t DeviceBatch::index() const { return info().index; }
int64_t DeviceBatch::size() const { return info().samples; }

absl::Span<const int64_t> DeviceBatch::sample_indices() const {
  return info().sample_indices;
}

const Device& DeviceBatch::device() const {
  static const Device kHost = Device::Host();
  if (lease_) return lease_->device;
  return completed_ ? completed_->device() : kHost;
}

int DeviceBatch::buffer_index() const { return lease_ ? lease_->buffer : -1; }

int DeviceBatch::num_fields() const {
  return lease_ ? static_cast<int>(lease_->fields->size()) : 0;
}

const FieldView& DeviceBatch::field(int i) const {
  static const FieldView kNone;
  if (!lease_ || i < 0 || i >= num_fields()) return kNone;
  return (*lease_->fields)[i];
}

absl::StatusOr<FieldView> DeviceBatch::field(absl::string_view name) const {
  if (!lease_) {
    return absl::FailedPreconditionError(
        absl::StrCat("field '", name, "' of a released batch"));
  }
  for (const FieldView& f : *lease_->fields) {
    if (f.name == name) return f;
  }
  return absl::NotFoundError(
      absl::StrCat("batch has no field '", name, "'; fields: ",
                   absl::StrJoin(*lease_->fields, ", ",
                                 [](std::string* out, const FieldView& f) {
                                   absl::StrAppend(out, f.name);
                                 })));
}

const Event& DeviceBatch::ready() const {
  if (lease_) return *lease_->ready;
  return completed_ ? *completed_ : CompletedHostEvent();
}

absl::Status DeviceBatch::WaitOn(const Stream& consumer) {
  if (!lease_) {
    return absl::FailedPreconditionError("WaitOn: the batch has been released");
  }
  if (!(consumer.device() == lease_->device)) {
    return absl::InvalidArgumentError(
        absl::StrCat("WaitOn: the batch is on ", lease_->device.ToString(),
                     " but the stream on ", consumer.device().ToString()));
  }
  absl::Status status = consumer.WaitFor(*lease_->ready);
  if (!status.ok()) return status;
  lease_->waited = true;
  lease_->wait_stream = consumer.native_handle();
  return absl::OkStatus();
}

absl::Status DeviceBatch::WaitOnHost() const {
  if (!lease_) {
    return absl::FailedPreconditionError(
        "WaitOnHost: the batch has been released");
  }
  return lease_->ready->Wait();
}

absl::Status DeviceBatch::Release(const Stream& consumer) {
  if (!lease_) return absl::OkStatus();
  absl::Status status = lease_->consumed->Record(consumer);
  if (status.ok()) {
    lease_->consumed_recorded = true;
  } else {
    // Cannot fence the reuse on the stream: wait for it on the host instead.
    absl::Status sync = consumer.Synchronize();
    if (!sync.ok()) status.Update(sync);
  }
  lease_.reset();
  return status;
}

absl::Status DeviceBatch::Release() {
  if (!lease_) return absl::OkStatus();
  // See Note [release fences reuse].
  void* stream = lease_->waited ? lease_->wait_stream : nullptr;
  return Release(Stream::Borrow(lease_->device, stream));
}

void DeviceBatch::MarkDelivered() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (lease_ && !lease_->delivered) {
    lease_->delivered = true;
    ++lease_->shared->held;
  }
}

bool DeviceBatch::released() const { return lease_ == nullptr; }

absl::StatusOr<DLManagedTensor*> DeviceBatch::ToDLPack(int i) const {
  if (!lease_) {
    return absl::FailedPreconditionError(
        "ToDLPack: the batch has been released");
  }
  if (i < 0 || i >= num_fields()) {
    return absl::OutOfRangeError(absl::StrCat(
        "ToDLPack: field ", i, " of a batch with ", num_fields(), " fields"));
  }
  const FieldView& f = (*lease_->fields)[i];
  auto* context = new DLPackContext{lease_, f.shape, {}};
  DLTensor& t = context->tensor.dl_tensor;
  t.data = f.data;
  t.device = lease_->device.is_cuda()
                 ? DLDevice{kDLCUDA, lease_->device.ordinal()}
                 : DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(context->shape.size());
  t.dtype = ToDLDataType(f.dtype);
  t.shape = context->shape.data();
  t.strides = nullptr;  // compact, row-major
  t.byte_offset = 0;
  context->tensor.manager_ctx = context;
  context->tensor.deleter = [](DLManagedTensor* self) {
    delete static_cast<DLPackContext*>(self->manager_ctx);
  };
  return &context->tensor;
}

}  // namespace pinwheel
