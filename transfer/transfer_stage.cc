#include "transfer/transfer_stage.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "pinning/base/mutex.h"
#include "pinning/base/status_macros.h"
#include "transfer/internal/batch_lease.h"

namespace pinwheel {

namespace {

constexpr size_t AlignUp(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// Returns field `f` of `layout` for a batch of `samples` samples at
// `offset` bytes from `base` (the layout's own offset by default).
FieldView ViewOf(const BatchLayout& layout, int f, std::byte* base,
                 int64_t samples, size_t offset = ~size_t{0}) {
  const FieldSpec& spec = layout.fields()[f];
  FieldView view;
  view.name = spec.name;
  view.dtype = spec.dtype;
  view.shape.reserve(spec.shape.size() + 1);
  view.shape.push_back(samples);
  view.shape.insert(view.shape.end(), spec.shape.begin(), spec.shape.end());
  view.data = base + (offset == ~size_t{0} ? layout.field_offset(f) : offset);
  view.bytes = spec.bytes() * static_cast<size_t>(samples);
  return view;
}

// Note [the delivered layout]
// Loader::layout() describes what a DeviceBatch carries: with a device
// transform, its outputs, then the input fields it keeps, in the copied
// batch's order (sample fields, then length fields). That is a BatchLayout
// of the outputs and the kept sample fields when the kept fields are
// closed under lengths (each kept variable-length field keeps its
// "<name>_length", and each kept length its field): BatchLayout::Create()
// appends those lengths in the same order. Otherwise (a transform that
// consumes one of the pair) every delivered field is described as a fixed
// one, a variable-length field by its maximum shape, so that field(i) is
// still fields()[i]. Its offsets describe a packed slot of those fields,
// not the device buffer: a batch's fields are where DeviceBatch::field()
// says.
absl::StatusOr<BatchLayout> DeliveredLayout(const BatchLayout& input,
                                            const BatchLayout& output,
                                            const std::vector<int>& kept) {
  const int sample_fields = input.sample().num_fields();
  auto is_kept = [&](int f) {
    return std::find(kept.begin(), kept.end(), f) != kept.end();
  };
  bool closed = true;
  for (int f = 0; f < sample_fields; ++f) {
    const int length = input.length_field(f);
    if (length >= 0 && is_kept(f) != is_kept(length)) closed = false;
  }
  std::vector<FieldSpec> fields = output.fields();
  for (int f : kept) {
    if (closed && f >= sample_fields) continue;  // Create() adds it back
    FieldSpec spec = input.fields()[f];
    if (!closed) spec.variable_length = false;
    fields.push_back(std::move(spec));
  }
  absl::StatusOr<SampleLayout> sample = SampleLayout::Create(std::move(fields));
  if (!sample.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the delivered fields (its outputs, then the inputs it "
                     "keeps) do not form a layout: ",
                     sample.status().message()));
  }
  return BatchLayout::Create(*sample, input.batch_size());
}

}  // namespace

// Note [fields read only on the host]
// The GPU JPEG decoder reads the compressed bytes from the pinned slot
// (nvJPEG takes host memory), so their device copy was never read: with a
// 1 MiB "jpeg" row per sample, 268 MB of a 256-sample batch crossed PCIe for
// nothing. A transform now names such fields (ReadsOnlyOnHost); the stage
// lays out the device buffer without them (the other fields keep their
// relative offsets within each run of consecutive copied fields, each run
// at a kFieldAlignment boundary) and issues one copy per run: for the
// compressed image layout one copy of the fields after "jpeg" instead of
// one of the whole slot. Without such fields the plan is the old one: one
// run, the device offsets the slot's, one copy of CopyBytes(samples).
absl::StatusOr<TransferStage::TransformPlan> TransferStage::PlanTransform(
    const BatchLayout& layout,
    std::shared_ptr<const DeviceTransform> transform) {
  TransformPlan plan;
  // The copies, and where each copied field lands in a device buffer.
  plan.device_offset.assign(layout.num_fields(), kHostOnly);
  size_t device_end = 0;
  for (int f = 0; f < layout.num_fields(); ++f) {
    const FieldSpec& spec = layout.fields()[f];
    if (transform != nullptr && transform->ReadsOnlyOnHost(spec.name)) {
      if (!transform->ReadsHostInput() || !transform->Consumes(spec.name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device transform '", transform->name(), "': field '", spec.name,
            "' is read only on the host, so it must be consumed by a "
            "transform that ReadsHostInput()"));
      }
      continue;
    }
    if (!plan.copies.empty() && plan.copies.back().last == f - 1) {
      const int first = plan.copies.back().first;
      plan.copies.back().last = f;
      plan.device_offset[f] = plan.device_offset[first] +
                              layout.field_offset(f) -
                              layout.field_offset(first);
    } else {
      plan.copies.push_back({.first = f, .last = f});
      plan.device_offset[f] = AlignUp(device_end, BatchLayout::kFieldAlignment);
    }
    device_end = plan.device_offset[f] +
                 spec.bytes() * static_cast<size_t>(layout.batch_size());
  }
  if (transform == nullptr) return plan;
  const std::string name = transform->name();
  auto refuse = [&](absl::StatusCode code, absl::string_view why) {
    return absl::Status(code,
                        absl::StrCat("device transform '", name, "': ", why));
  };
  absl::StatusOr<SampleLayout> output = transform->OutputLayout(layout);
  if (!output.ok()) {
    return refuse(output.status().code(), output.status().message());
  }
  for (const FieldSpec& spec : output->fields()) {
    if (spec.variable_length) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("output field '", spec.ToString(),
                                 "' is variable-length; outputs must be "
                                 "fixed-size"));
    }
  }
  absl::StatusOr<BatchLayout> batch =
      BatchLayout::Create(*output, layout.batch_size());
  if (!batch.ok()) {
    return refuse(batch.status().code(), batch.status().message());
  }
  for (int f = 0; f < layout.num_fields(); ++f) {
    const std::string& field = layout.fields()[f].name;
    if (transform->Consumes(field)) continue;
    if (output->FieldIndex(field) >= 0) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("output field '", field,
                                 "' has the name of an input field it keeps; "
                                 "consume the input or rename the output"));
    }
    plan.kept.push_back(f);
  }
  absl::StatusOr<BatchLayout> delivered =
      DeliveredLayout(layout, *batch, plan.kept);
  if (!delivered.ok()) {
    return refuse(delivered.status().code(), delivered.status().message());
  }
  plan.delivered = *std::move(delivered);
  plan.transform = std::move(transform);
  plan.output = *std::move(batch);
  plan.output_offset = AlignUp(device_end, BatchLayout::kFieldAlignment);
  return plan;
}

absl::StatusOr<size_t> TransferStage::DeviceBufferBytes(
    const BatchLayout& layout,
    std::shared_ptr<const DeviceTransform> transform) {
  PINWHEEL_ASSIGN_OR_RETURN(TransformPlan plan,
                            PlanTransform(layout, std::move(transform)));
  return plan.transform == nullptr
             ? layout.slot_bytes()
             : plan.output_offset + plan.output.slot_bytes();
}

absl::StatusOr<std::unique_ptr<TransferStage>> TransferStage::Create(
    const Device& device, PinnedRing* ring, const BatchLayout& layout,
    int device_buffers, std::shared_ptr<const DeviceTransform> transform,
    const std::vector<StaticDeviceBuffer>& static_buffers,
    SampleFaultPolicy faults) {
  if (ring->slot_bytes() < layout.slot_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transfer stage: ring slots of ", ring->slot_bytes(),
        " bytes cannot hold batches of ", layout.slot_bytes(), " bytes"));
  }
  PINWHEEL_ASSIGN_OR_RETURN(TransformPlan plan,
                            PlanTransform(layout, std::move(transform)));
  // With a transform a buffer holds the copy and, after it, the output: one
  // allocation, fenced and recycled as one (see transfer/device_transform.h).
  const size_t buffer_bytes =
      plan.transform == nullptr ? layout.slot_bytes()
                                : plan.output_offset + plan.output.slot_bytes();
  PINWHEEL_ASSIGN_OR_RETURN(Stream copy_stream, Stream::Create(device));
  if (!static_buffers.empty() &&
      static_cast<size_t>(device_buffers) != static_buffers.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transfer stage: device_buffers = ", device_buffers, " but ",
        static_buffers.size(), " static device buffers: they must match"));
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<DeviceBufferPool> pool,
      static_buffers.empty()
          ? DeviceBufferPool::Create(device, device_buffers, buffer_bytes)
          : DeviceBufferPool::Borrow(device, static_buffers, buffer_bytes));
  std::vector<std::shared_ptr<Event>> copy_done;
  std::vector<std::shared_ptr<Event>> consumed;
  for (int i = 0; i < device_buffers; ++i) {
    PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<Event> done,
                              Event::Create(device));
    PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<Event> used,
                              Event::Create(device));
    copy_done.push_back(std::move(done));
    consumed.push_back(std::move(used));
  }
  std::vector<std::shared_ptr<Event>> slot_copied;
  for (int i = 0; i < ring->slots(); ++i) {
    PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<Event> copied,
                              Event::Create(device));
    slot_copied.push_back(std::move(copied));
  }
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<Event> completed,
                            Event::Create(device));
  return std::unique_ptr<TransferStage>(new TransferStage(
      device, ring, layout, std::move(copy_stream), std::move(pool),
      std::make_shared<internal::StageShared>(), std::move(copy_done),
      std::move(consumed), std::move(slot_copied), std::move(completed),
      std::move(plan), faults));
}

TransferStage::TransferStage(const Device& device, PinnedRing* ring,
                             BatchLayout layout, Stream copy_stream,
                             std::shared_ptr<DeviceBufferPool> pool,
                             std::shared_ptr<internal::StageShared> shared,
                             std::vector<std::shared_ptr<Event>> copy_done,
                             std::vector<std::shared_ptr<Event>> consumed,
                             std::vector<std::shared_ptr<Event>> slot_copied,
                             std::shared_ptr<const Event> completed,
                             TransformPlan plan, SampleFaultPolicy faults)
    : device_(device),
      ring_(ring),
      layout_(std::move(layout)),
      copy_stream_(std::move(copy_stream)),
      pool_(std::move(pool)),
      copy_done_(std::move(copy_done)),
      consumed_(std::move(consumed)),
      slot_copied_(std::move(slot_copied)),
      completed_(std::move(completed)),
      plan_(std::move(plan)),
      faults_(faults),
      shared_(std::move(shared)),
      mu_(shared_->mu) {
  // Built once: a full batch's fields differ between buffers only in their
  // pointers, and building them per batch would allocate in the hot path.
  for (int b = 0; b < pool_->buffers(); ++b) {
    full_batch_fields_.push_back(
        FieldsOf(pool_->buffer_data(b), layout_.batch_size()));
    if (plan_.transform == nullptr) continue;
    std::byte* base = pool_->buffer_data(b);
    std::vector<FieldView> input;
    for (int f = 0; f < layout_.num_fields(); ++f) {
      if (plan_.device_offset[f] == kHostOnly) {
        // Not on the device (Note [fields read only on the host]).
        FieldView none = ViewOf(layout_, f, nullptr, layout_.batch_size(), 0);
        none.data = nullptr;
        none.bytes = 0;
        input.push_back(std::move(none));
        continue;
      }
      input.push_back(ViewOf(layout_, f, base, layout_.batch_size(),
                             plan_.device_offset[f]));
    }
    std::vector<FieldView> output;
    for (int f = 0; f < plan_.output.num_fields(); ++f) {
      output.push_back(ViewOf(plan_.output, f, base + plan_.output_offset,
                              layout_.batch_size()));
    }
    transform_input_.push_back(std::move(input));
    transform_output_.push_back(std::move(output));
  }
  if (plan_.transform != nullptr && plan_.transform->ReadsHostInput()) {
    for (int r = 0; r < ring_->slots(); ++r) {
      std::vector<FieldView> host;
      for (int f = 0; f < layout_.num_fields(); ++f) {
        host.push_back(
            ViewOf(layout_, f, ring_->slot(r).data, layout_.batch_size()));
      }
      transform_host_input_.push_back(std::move(host));
    }
  }
  stats_.device_buffers = pool_->buffers();
  stats_.device_bytes = pool_->bytes_allocated();
  copy_thread_ = std::thread([this] { CopyLoop(); });
}

TransferStage::~TransferStage() { Shutdown(); }

// Note [copy issued by the submitter]
// A batch submitted while nothing is queued or being copied, with a device
// buffer free right now, is copied by the submitting thread itself (the
// producer pipeline's last, serial stage): no hand-off to the copy thread and
// back, one lock round trip instead of two. Otherwise it is queued for the
// copy thread, which then stays the only copier until the queue is empty.
// `copying_` is the baton: whoever sets it (the copy thread or a submitter)
// is the only one issuing copies until it clears it, and it pushes its
// delivery onto ready_ in the same critical section that clears it, so
// deliveries keep submission order. The submitter never blocks: it takes a
// buffer with TryAcquire(), and when none is free it puts the batch at the
// front of the queue (nothing else was queued) and hands the baton back.
void TransferStage::Submit(FilledBatch batch) {
  {
    internal::MutexLock lock(&mu_);
    const bool queue = stopping_ || copying_ || !submitted_.empty();
    if (!queue && batch.kind != FilledBatch::Kind::kBatch && batch.slot < 0) {
      // A marker (an end of epoch, an error) holding no slot: nothing to
      // copy, so it joins the deliveries now, behind the batches Issue()
      // queued before it.
      Publish(MarkerOf(batch), CopyCost());
      return;
    }
    if (queue || batch.kind != FilledBatch::Kind::kBatch) {
      submitted_.push_back(std::move(batch));
      return;
    }
    copying_ = true;
  }
  std::optional<DeviceBufferPool::Buffer> buffer = pool_->TryAcquire();
  if (!buffer) {
    internal::MutexLock lock(&mu_);
    copying_ = false;
    submitted_.push_front(std::move(batch));
    return;
  }
  CopyCost cost;
  absl::StatusOr<Delivery> delivery = Copy(std::move(batch), *buffer, cost);
  internal::MutexLock lock(&mu_);
  copying_ = false;
  ++stats_.inline_copies;
  Publish(std::move(delivery), cost);
}

void TransferStage::Publish(absl::StatusOr<Delivery> delivery,
                            const CopyCost& cost) {
  if (!delivery.ok()) {
    Delivery failed;
    failed.kind = FilledBatch::Kind::kError;
    failed.error = delivery.status();
    ready_.push_back(std::move(failed));
    return;
  }
  if (delivery->kind == FilledBatch::Kind::kBatch) {
    ++stats_.batches_copied;
    stats_.bytes_copied += cost.bytes;
    if (cost.waited) ++stats_.buffer_waits;
    stats_.buffer_wait_time += cost.wait;
    stats_.issue_time += cost.issue;
    stats_.samples_skipped += cost.skipped;
    if (cost.skipped > 0) stats_.last_skipped = cost.last_skipped;
    // Every sample skipped: nothing to deliver (as the workers' kSkipSample
    // does with a batch that lost every sample).
    if (delivery->batch.released()) return;
  }
  ready_.push_back(*std::move(delivery));
}

void TransferStage::CopyLoop() {
  while (true) {
    FilledBatch item;
    {
      internal::MutexLock lock(&mu_);
      // A submitter copying (see Note [copy issued by the submitter]) holds
      // the baton: wait for it to finish before taking the next batch.
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || (!submitted_.empty() && !copying_);
      };
      if (!has_work()) {
        const absl::Time idle_start = absl::Now();
        internal::Await(mu_, has_work);
        stats_.idle_time += absl::Now() - idle_start;
      }
      if (stopping_) return;
      item = std::move(submitted_.front());
      submitted_.pop_front();
      copying_ = true;
    }
    CopyCost cost;
    absl::StatusOr<Delivery> delivery = Copy(std::move(item), cost);
    internal::MutexLock lock(&mu_);
    copying_ = false;
    if (!delivery.ok() && absl::IsCancelled(delivery.status())) {
      return;  // shutting down
    }
    Publish(std::move(delivery), cost);
  }
}

absl::StatusOr<TransferStage::Delivery> TransferStage::Copy(FilledBatch item,
                                                            CopyCost& cost) {
  if (item.kind != FilledBatch::Kind::kBatch) {
    if (item.slot >= 0) ring_->Recycle(item.slot, nullptr);
    return MarkerOf(item);
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<DeviceBufferPool::Buffer> buffer =
      pool_->Acquire(&cost.waited);
  cost.wait = absl::Now() - start;
  if (!buffer.ok()) {
    ring_->Recycle(item.slot, nullptr);
    return buffer.status();
  }
  return Copy(std::move(item), *buffer, cost);
}

// Note [a host-reading transform's fence]
// A device transform that reads the pinned slot itself (a GPU JPEG decoder
// reads the compressed bytes from host memory: nvJPEG's hybrid backend on
// the calling thread, its hardware backend by a copy queued on the stream)
// must see the slot unchanged until its work has run. Its slot fence is
// therefore recorded after Run() has queued that work, not after the copy;
// the producer then refills the slot only once the stream has passed the
// transform. Other transforms keep the earlier fence (the slot is free as
// soon as it is copied). device_transform_test's
// DeviceStage.AHostReadingTransformSeesItsSlotUnchanged fails with the
// fence before Run().

// Note [a slot's own fence]
// A ring slot is recycled behind an event of its own, recorded right after
// the copy out of it, not behind the device buffer's copy_done. copy_done
// is recorded again each time its buffer is reused, and a fenced slot waits
// for whatever the event marks when the slot is next acquired: behind
// copy_done, the slot of batch k (buffer b) would wait for the copy of
// batch k + device_buffers, k + 2 * device_buffers, ... (the latest one into
// b), so with more slots than buffers the producer could not start a batch
// until the copy queue had nearly drained, and the copy engine idled while
// the next batch was filled. Old and new code alternately on an H100
// (samples/bench/probes/copy_limits, W2: 32 x 16 KiB samples; 3 rounds): 14
// workers, 32 slots, 4 buffers went from 40-41 k to 44-53 k batches/s; 64
// slots, 8 buffers from 47-61 k to 45-69 k (one noisy round each); W1 with
// 8 slots and 2 buffers from 0.78-0.81 to 0.82-0.85 of the raw copy. The
// cost is one more event record per batch (~0.4 us of host time).
// (The buffer's copy_done stays the batch's ready event: it is not recorded
// again while the consumer holds the batch, whereas a slot is reused as soon
// as its copy is done.)
absl::StatusOr<TransferStage::Delivery> TransferStage::Copy(
    FilledBatch item, const DeviceBufferPool::Buffer& buffer, CopyCost& cost) {
  Delivery delivery;
  delivery.kind = item.kind;
  delivery.epoch = item.info.epoch;
  delivery.index = item.info.index;
  const PinnedRing::Slot slot = ring_->slot(item.slot);
  const size_t bytes = CopyBytes(item.info.samples);
  // See Note [one copy per batch].
  const absl::Time issue_start = absl::Now();
  absl::Status status;
  for (const TransformPlan::CopyRun& run : plan_.copies) {
    const size_t from = layout_.field_offset(run.first);
    status = copy_stream_.CopyToDeviceAsync(
        buffer.data + plan_.device_offset[run.first], slot.data + from,
        RunBytes(run, item.info.samples));
    if (!status.ok()) break;
  }
  const std::shared_ptr<Event>& copy_done = copy_done_[buffer.index];
  const std::shared_ptr<Event>& slot_copied = slot_copied_[item.slot];
  if (plan_.transform == nullptr) {
    if (status.ok()) status = copy_done->Record(copy_stream_);
    if (status.ok()) status = slot_copied->Record(copy_stream_);
  } else {
    // The device stage: the slot is free once copied (or, for a transform
    // that reads it, once transformed); the batch is ready once transformed.
    // See Note [a host-reading transform's fence].
    const bool reads_host = plan_.transform->ReadsHostInput();
    if (status.ok() && !reads_host) status = slot_copied->Record(copy_stream_);
    std::vector<SampleFault> skipped;  // allocates only when one is skipped
    if (status.ok()) {
      status = plan_.transform->Run(
          {.input = transform_input_[buffer.index],
           .output = transform_output_[buffer.index],
           .samples = item.info.samples,
           .host_input = reads_host ? absl::Span<const FieldView>(
                                          transform_host_input_[item.slot])
                                    : absl::Span<const FieldView>(),
           .sample_indices = item.info.sample_indices,
           .padded = item.info.padded,
           .skipped = faults_.skip ? &skipped : nullptr},
          copy_stream_);
      if (status.ok() && !skipped.empty()) {
        status = DropSkipped(skipped, buffer.data, item.info, cost);
      }
      if (!status.ok()) {
        status =
            absl::Status(status.code(), absl::StrCat("device transform '",
                                                     plan_.transform->name(),
                                                     "': ", status.message()));
      }
    }
    if (status.ok() && reads_host) status = slot_copied->Record(copy_stream_);
    if (status.ok()) status = copy_done->Record(copy_stream_);
  }
  cost.issue = absl::Now() - issue_start;
  if (!status.ok()) {
    // The copy may or may not be queued: wait for the stream before the slot
    // and buffer are reused.
    copy_stream_.Synchronize().IgnoreError();
    ring_->Recycle(item.slot, nullptr);
    pool_->Release(buffer.index, nullptr);
    return absl::Status(
        status.code(),
        absl::StrCat("copying batch ", item.info.index, " of epoch ",
                     item.info.epoch, " (", bytes, " bytes) to ",
                     device_.ToString(), ": ", status.message()));
  }
  // The slot is refilled only after its copy is done: the DESIGN.md
  // invariant. See Note [a slot's own fence].
  ring_->Recycle(item.slot, slot_copied);
  cost.bytes = static_cast<int64_t>(bytes);
  if (item.info.samples == 0) {
    // Every sample skipped: the buffer goes back behind the work queued on
    // it, and nothing is delivered (Publish() sees the empty batch).
    pool_->Release(buffer.index, copy_done);
    return delivery;
  }

  delivery.batch = LeaseOf(std::move(item.info), buffer);
  return delivery;
}

TransferStage::Delivery TransferStage::MarkerOf(FilledBatch& marker) {
  Delivery delivery;
  delivery.kind = marker.kind;
  delivery.epoch = marker.info.epoch;
  delivery.index = marker.info.index;
  delivery.error = std::move(marker.error);
  return delivery;
}

DeviceBatch TransferStage::LeaseOf(BatchInfo info,
                                   const DeviceBufferPool::Buffer& buffer) {
  auto lease = std::make_shared<internal::BatchLease>();
  lease->pool = pool_;
  lease->buffer = buffer.index;
  lease->ready = copy_done_[buffer.index];
  lease->consumed = consumed_[buffer.index];
  lease->completed = completed_;
  lease->device = device_;
  lease->fields = info.samples == layout_.batch_size()
                      ? full_batch_fields_[buffer.index]
                      : FieldsOf(buffer.data, info.samples);
  lease->info = std::move(info);
  lease->shared = shared_;
  return DeviceBatch(std::move(lease));
}

absl::StatusOr<bool> TransferStage::Issue(BatchInfo& info, IssueRun run) {
  CopyCost cost;
  std::optional<DeviceBufferPool::Buffer> buffer = pool_->TryAcquire();
  if (!buffer) {
    {
      internal::MutexLock lock(&mu_);
      if (stopping_) return absl::CancelledError("transfer stage shut down");
      // A batch already issued holds a buffer the consumer will take: no
      // need to wait (and no wait could end before it is taken). With every
      // buffer held no wait could end either: Next() says so.
      if (!ready_.empty() || ConsumerHoldsEveryBuffer()) return false;
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<DeviceBufferPool::Buffer> acquired =
        pool_->Acquire(&cost.waited);
    cost.wait = absl::Now() - start;
    if (!acquired.ok()) return acquired.status();
    buffer = *acquired;
  }
  const absl::Time issue_start = absl::Now();
  const int b = buffer->index;
  absl::Status status = run({.input = transform_input_[b],
                             .output = transform_output_[b],
                             .samples = info.samples,
                             .sample_indices = info.sample_indices,
                             .padded = info.padded},
                            copy_stream_);
  if (status.ok()) status = copy_done_[b]->Record(copy_stream_);
  cost.issue = absl::Now() - issue_start;
  if (!status.ok()) {
    copy_stream_.Synchronize().IgnoreError();  // see Copy()
    pool_->Release(b, nullptr);
    return absl::Status(
        status.code(),
        absl::StrCat("gathering batch ", info.index, " of epoch ", info.epoch,
                     " on ", device_.ToString(), ": ", status.message()));
  }
  Delivery delivery;
  delivery.epoch = info.epoch;
  delivery.index = info.index;
  delivery.batch = LeaseOf(std::move(info), *buffer);
  internal::MutexLock lock(&mu_);
  ++stats_.inline_copies;
  Publish(std::move(delivery), cost);
  return true;
}

// Note [samples a transform skips]
// Under ErrorPolicy::kSkipSample a device transform that cannot produce a
// sample (the GPU JPEG decoder and a corrupt file) lists it in
// DeviceTransformBatch::skipped instead of failing the batch, having written
// the other samples' outputs packed at the front. The stage then matches
// what the workers' kSkipSample does on the host: the batch is delivered
// shorter, the sample's index dropped from sample_indices, the sample
// counted (TransferStats::samples_skipped, added to
// LoaderStats::samples_skipped); under pad_last_batch it keeps its size and
// the samples left out become padding at its end. The kept input fields are
// packed on the copy stream, after the copy and before the ready event:
// each run of good samples moves down by the samples skipped before it, in
// chunks of at most that many rows, front to back, so that no copy's source
// and destination overlap and no row is overwritten before it is read.
// Device-to-device copies of a few small rows, only in a batch that lost a
// sample; under pad_last_batch the freed tail rows are zeroed (the valid
// field's zero says padding). A batch that loses every sample is not
// delivered. The consumer never sees a sample the transform did not
// produce.
absl::Status TransferStage::DropSkipped(const std::vector<SampleFault>& skipped,
                                        std::byte* buffer, BatchInfo& info,
                                        CopyCost& cost) const {
  const int64_t samples = info.samples;
  const int64_t real = samples - info.padded;
  for (size_t k = 0; k < skipped.size(); ++k) {
    const int64_t place = skipped[k].place;
    if (place < 0 || place >= real ||
        (k > 0 && place <= skipped[k - 1].place)) {
      return absl::InternalError(absl::StrCat(
          "skipped sample place ", place, " (", k, " of ", skipped.size(),
          "): places must ascend within the batch's ", real, " real samples"));
    }
  }
  const auto skipped_count = static_cast<int64_t>(skipped.size());
  for (int f : plan_.kept) {
    const size_t row = layout_.fields()[f].bytes();
    std::byte* base = buffer + plan_.device_offset[f];
    // Run k: the samples between skipped[k] and skipped[k + 1] (or the
    // batch's end), moved down by k + 1 rows.
    for (size_t k = 0; k < skipped.size(); ++k) {
      const int64_t shift = static_cast<int64_t>(k) + 1;
      const int64_t begin = skipped[k].place + 1;
      const int64_t end =
          k + 1 < skipped.size() ? skipped[k + 1].place : samples;
      for (int64_t from = begin; from < end; from += shift) {
        const int64_t rows = std::min(shift, end - from);
        PINWHEEL_RETURN_IF_ERROR(copy_stream_.CopyOnDeviceAsync(
            base + static_cast<size_t>(from - shift) * row,
            base + static_cast<size_t>(from) * row,
            static_cast<size_t>(rows) * row));
      }
    }
    if (faults_.pad) {
      PINWHEEL_RETURN_IF_ERROR(copy_stream_.ZeroAsync(
          base + static_cast<size_t>(samples - skipped_count) * row,
          static_cast<size_t>(skipped_count) * row));
    }
  }
  for (auto it = skipped.rbegin(); it != skipped.rend(); ++it) {
    if (static_cast<size_t>(it->place) < info.sample_indices.size()) {
      info.sample_indices.erase(info.sample_indices.begin() + it->place);
    }
  }
  if (faults_.pad) {
    info.sample_indices.insert(info.sample_indices.end(),
                               static_cast<size_t>(skipped_count), -1);
    info.padded += skipped_count;
  } else {
    info.samples -= skipped_count;
  }
  cost.skipped = skipped_count;
  cost.last_skipped =
      absl::StrCat("batch ", info.index, " of epoch ", info.epoch, ": ",
                   skipped.back().status.message());
  return absl::OkStatus();
}

size_t TransferStage::RunBytes(const TransformPlan::CopyRun& run,
                               int64_t samples) const {
  return layout_.field_offset(run.last) - layout_.field_offset(run.first) +
         layout_.fields()[run.last].bytes() * static_cast<size_t>(samples);
}

size_t TransferStage::CopyBytes(int64_t samples) const {
  size_t bytes = 0;
  for (const TransformPlan::CopyRun& run : plan_.copies) {
    bytes += RunBytes(run, samples);
  }
  return bytes;
}

std::shared_ptr<const std::vector<FieldView>> TransferStage::FieldsOf(
    std::byte* buffer, int64_t samples) const {
  auto fields = std::make_shared<std::vector<FieldView>>();
  if (plan_.transform == nullptr) {
    fields->reserve(layout_.num_fields());
    for (int f = 0; f < layout_.num_fields(); ++f) {
      fields->push_back(ViewOf(layout_, f, buffer, samples));
    }
    return fields;
  }
  fields->reserve(plan_.output.num_fields() + plan_.kept.size());
  for (int f = 0; f < plan_.output.num_fields(); ++f) {
    fields->push_back(
        ViewOf(plan_.output, f, buffer + plan_.output_offset, samples));
  }
  for (int f : plan_.kept) {
    fields->push_back(
        ViewOf(layout_, f, buffer, samples, plan_.device_offset[f]));
  }
  return fields;
}

// Note [waits woken by the state change]
// Next() and DiscardPending() wait on mu_ for a condition (a delivery, the
// stage idle, shutting down, or the consumer holding every buffer) that
// every change makes under mu_: the copy thread and submitters publish
// under it, and a delivered batch let go counts itself out of
// StageShared::held under it (the lock lives in StageShared, which the
// batches share, so a batch may outlive the stage). No wait polls.
bool TransferStage::ConsumerHoldsEveryBuffer() const {
  return shared_->held >= pool_->buffers();
}

absl::StatusOr<TransferStage::Delivery> TransferStage::Next(
    absl::Time deadline) {
  internal::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !ready_.empty() || ConsumerHoldsEveryBuffer();
  };
  if (!internal::AwaitWithDeadline(mu_, ready, deadline)) {
    return absl::DeadlineExceededError("no batch ready before the deadline");
  }
  if (!stopping_ && ready_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the consumer holds all ", pool_->buffers(),
        " device buffers (DeviceBatches or DLPack views not released): no "
        "further batch can be copied; release a batch before calling Next(), "
        "or raise device_buffers"));
  }
  if (ready_.empty()) return absl::CancelledError("transfer stage shut down");
  Delivery delivery = std::move(ready_.front());
  ready_.pop_front();
  delivery.batch.MarkDelivered();
  return delivery;
}

absl::Status TransferStage::DiscardPending() {
  while (true) {
    std::deque<Delivery> dropped;
    bool idle;
    bool stuck;
    {
      internal::MutexLock lock(&mu_);
      internal::Await(mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !ready_.empty() ||
               (submitted_.empty() && !copying_) || ConsumerHoldsEveryBuffer();
      });
      dropped.swap(ready_);
      idle = submitted_.empty() && !copying_;
      stuck = ConsumerHoldsEveryBuffer();
      if (stopping_ && !idle && dropped.empty()) {
        return absl::CancelledError("transfer stage shut down");
      }
    }
    const bool had_any = !dropped.empty();
    dropped.clear();  // releases their buffers, outside the lock
    if (idle && !had_any) return absl::OkStatus();
    if (!had_any && stuck) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot restart the epoch: the consumer holds all ", pool_->buffers(),
          " device buffers; release them first"));
    }
  }
}

void TransferStage::Shutdown() {
  {
    internal::MutexLock lock(&mu_);
    if (stopping_ && !copy_thread_.joinable()) return;
    stopping_ = true;
  }
  pool_->Cancel();  // wakes a copy waiting for a free buffer
  if (copy_thread_.joinable()) copy_thread_.join();
  std::deque<FilledBatch> submitted;
  std::deque<Delivery> ready;
  {
    internal::MutexLock lock(&mu_);
    // A submitter may be issuing a copy (it never blocks): let it publish.
    internal::Await(
        mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !copying_; });
    submitted.swap(submitted_);
    ready.swap(ready_);
  }
  for (const FilledBatch& item : submitted) {
    if (item.slot >= 0) ring_->Recycle(item.slot, nullptr);
  }
  ready.clear();
  copy_stream_.Synchronize().IgnoreError();
}

bool TransferStage::Idle() const {
  internal::MutexLock lock(&mu_);
  return submitted_.empty() && ready_.empty() && !copying_;
}

TransferStats TransferStage::stats() const {
  internal::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace pinwheel
