#include "loader/pipeline/loader_core.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

#include "loader/internal/numa.h"
#include "loader/loader.h"
#include "loader/pipeline/memory_admission.h"
#include "pinning/base/nvtx_range.h"
#include "pinning/base/status_macros.h"

namespace pinwheel::internal {

absl::StatusOr<SampleLayout> LoaderCore::DeliveredSampleLayout(
    const LoaderOptions& requested, SampleLayout sample) {
  if (requested.pad_last_batch) {
    // The validity mask, appended after the dataset's fields (BatchFiller::
    // Pad() finds it there).
    if (sample.FieldIndex(requested.valid_field) >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LoaderBuilder: option 'valid_field' = '", requested.valid_field,
          "': the dataset already has a field of that name; pick another "
          "for pad_last_batch's mask"));
    }
    std::vector<FieldSpec> fields = sample.fields();
    fields.push_back({.name = requested.valid_field, .dtype = DType::kUInt8});
    absl::StatusOr<SampleLayout> padded = SampleLayout::Create(fields);
    if (!padded.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LoaderBuilder: option 'valid_field' = '", requested.valid_field,
          "': ", padded.status().message()));
    }
    sample = *std::move(padded);
  }
  return sample;
}

absl::StatusOr<size_t> LoaderCore::DeviceBufferBytes(
    const LoaderOptions& options, const SampleLayout& dataset_layout) {
  PINWHEEL_ASSIGN_OR_RETURN(SampleLayout sample,
                            DeliveredSampleLayout(options, dataset_layout));
  PINWHEEL_ASSIGN_OR_RETURN(BatchLayout layout,
                            BatchLayout::Create(sample, options.batch_size));
  return WorkerPathBufferBytes(options, layout);
}

absl::StatusOr<std::unique_ptr<LoaderCore>> LoaderCore::Create(
    const LoaderOptions& options, Device device, BatchLayout layout,
    LoaderPath path, const LoaderCheckpoint* resume) {
  const BatchLayout& fill_layout = path.fill_layout;
  const bool slots = path.writer->slot_layout() != nullptr;
  const HostMemoryKind memory = device.is_cuda() && options.pin_memory
                                    ? HostMemoryKind::kPageLocked
                                    : HostMemoryKind::kPageable;
  // Host memory admission, before anything is allocated: the ring plus (on
  // the host backend) the buffer pool against RAM and the cgroup limit.
  PINWHEEL_RETURN_IF_ERROR(AdmitHostMemory(
      {.ring_slots = slots ? options.prefetch : 0,
       .slot_bytes = fill_layout.slot_bytes(),
       .batch_size = options.batch_size,
       .sample_bytes = fill_layout.sample().sample_bytes(),
       .pool_buffers =
           device.is_cuda() || !options.static_device_buffers.empty()
               ? 0  // the caller's memory
               : options.device_buffers,
       .pool_buffer_bytes = path.writer->buffer_bytes(),
       .registered_bytes = path.gather.registered_bytes}));
  std::unique_ptr<PinnedRing> ring;
  if (slots) {
    absl::StatusOr<std::unique_ptr<PinnedRing>> made;
    RunOnNumaNode(
        NumaPlacementFor(device), [&] {  // first-touched on the GPU's node
          made = PinnedRing::Create(
              {.slots = options.prefetch,
               .slot_bytes = fill_layout.slot_bytes(),
               .memory = memory,
               .cuda_device = device.is_cuda() ? device.ordinal() : -1,
               // kAuto: slots allocated as the depth first reaches them.
               .allocate_on_first_use = path.auto_tune.prefetch});
        });
    if (!made.ok()) {
      const SampleLayout& sample = layout.sample();
      return absl::Status(
          made.status().code(),
          absl::StrCat("prefetch = ", options.prefetch, " slots of batch_size ",
                       options.batch_size, " × ", sample.sample_bytes(),
                       " bytes per sample (", sample.ToString(),
                       "): ", made.status().message()));
    }
    ring = *std::move(made);
  }
  absl::StatusOr<std::unique_ptr<TransferStage>> stage = TransferStage::Create(
      device, ring.get(), path.writer, options.device_buffers,
      options.static_device_buffers);
  if (!stage.ok()) {
    return absl::Status(
        stage.status().code(),
        options.static_device_buffers.empty()
            ? absl::StrCat("device_buffers = ", options.device_buffers, ": ",
                           stage.status().message())
            : absl::StrCat("LoaderBuilder: option 'static_device_buffers': ",
                           stage.status().message()));
  }
  const int64_t first_epoch = resume != nullptr ? resume->epoch : 0;
  return std::unique_ptr<LoaderCore>(
      new LoaderCore(options, device, std::move(layout), std::move(path),
                     std::move(ring), *std::move(stage), first_epoch));
}

LoaderCore::LoaderCore(const LoaderOptions& options, Device device,
                       BatchLayout layout, LoaderPath path,
                       std::unique_ptr<PinnedRing> ring,
                       std::unique_ptr<TransferStage> stage,
                       int64_t first_epoch)
    : pipeline_(std::make_shared<Pipeline>(
          Pipeline{.options = options,
                   .layout = std::move(layout),
                   .fill_layout = std::move(path.fill_layout),
                   .latencies = std::make_unique<LatencyRecorder>(),
                   .source = std::move(path.source),
                   .ring = std::move(ring),
                   .stage = std::move(stage)})),
      options_(pipeline_->options),
      device_(device),
      layout_(pipeline_->layout),
      fill_layout_(pipeline_->fill_layout),
      gather_(std::move(path.gather)),
      source_(pipeline_->source.get()),
      ring_(pipeline_->ring.get()),
      stage_(pipeline_->stage.get()),
      delivered_layout_(stage_->delivered_layout()),
      producer_(
          (pipeline_->producer = std::make_unique<Producer>(
               options_, path.workers, path.worker_cpus, device_, fill_layout_,
               ring_, stage_, source_, pipeline_->latencies.get()))
              .get()),
      latencies_(pipeline_->latencies.get()),
      epoch_(first_epoch) {
  // Note [Open MPI's default binding is widened] (loader/worker_cpus.h):
  // the copy thread leaves the binding with the workers (the producer
  // thread and the arena's move themselves).
  if (!path.worker_cpus.empty()) stage_->MoveCopyThreadOnto(path.worker_cpus);
  const AutoTunePlan& plan = path.auto_tune;
  if (plan.workers && !producer_->inline_mode()) {
    pipeline_->gate =
        std::make_unique<WorkerGate>(plan.max_workers, producer_->stop_flag());
    producer_->UseGate(pipeline_->gate.get());
  }
  tuner_ = std::make_unique<AutoTuner>(plan, pipeline_->gate.get(),
                                       plan.prefetch ? ring_ : nullptr);
  tuner_->WatchDeviceBuffers(stage_);
  if (options_.sampler != nullptr) {
    try {
      samples_per_source_.assign(
          static_cast<size_t>(std::max(0, options_.sampler->num_sources())), 0);
    } catch (...) {
      samples_per_source_.clear();  // a sampler that throws gets no counts
    }
  }
  producer_->Start(first_epoch);
}

LoaderCore::~LoaderCore() { Shutdown(); }

namespace {

// Note [one consumer thread]
// A Loader has one consumer thread. Two threads in Next() at once (with
// num_workers = 0 both read inline) hung both; StartEpoch() or Checkpoint()
// during a Next() raced with it. Each of the three marks itself in in_call_
// for its whole run (RAII: every exit path clears it), and a call finding
// another one running returns FailedPrecondition at once, naming the rule.
// This detects overlapping calls only; calls from several threads that
// never overlap still need the caller's own synchronization.
class ConsumerCall {
 public:
  ConsumerCall(std::atomic<const char*>& in_call, const char* name)
      : in_call_(in_call) {
    const char* running = nullptr;
    if (in_call_.compare_exchange_strong(running, name,
                                         std::memory_order_acq_rel)) {
      entered_ = true;
    } else if (absl::string_view(running) == name) {
      status_ = absl::FailedPreconditionError(
          absl::StrCat(name,
                       "() called from two threads at once; a Loader has one "
                       "consumer thread"));
    } else {
      status_ = absl::FailedPreconditionError(absl::StrCat(
          name, "() called while ", running,
          "() runs on another thread; a Loader has one consumer thread"));
    }
  }
  ConsumerCall(const ConsumerCall&) = delete;
  ConsumerCall& operator=(const ConsumerCall&) = delete;
  ~ConsumerCall() {
    if (entered_) in_call_.store(nullptr, std::memory_order_release);
  }

  // OK when this call may run.
  const absl::Status& status() const { return status_; }

 private:
  std::atomic<const char*>& in_call_;
  bool entered_ = false;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<std::optional<DeviceBatch>> LoaderCore::Next() {
  const ConsumerCall call(in_call_, "Next");
  PINWHEEL_RETURN_IF_ERROR(call.status());
  if (shut_down_) return absl::CancelledError("Next() after Shutdown()");
  if (!restart_failed_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Next(): the loader is stopped: ", restart_failed_.message(),
        "; call StartEpoch() again"));
  }
  if (!failed_.ok()) return failed_;
  if (epoch_ > Loader::kMaxEpoch) {
    failed_ = PastTheLastEpoch(epoch_);
    return failed_;
  }
  const absl::Time start = absl::Now();
  absl::Duration step = absl::ZeroDuration();  // none at an epoch's start
  if (last_batch_returned_ != absl::InfinitePast()) {
    step = start - last_batch_returned_;
    latencies_->step.Record(step);
  }
  last_batch_returned_ = absl::InfinitePast();
  const absl::Time deadline = options_.timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : start + options_.timeout;
  // Inline mode reads a batch only when none is on its way: reading ahead
  // could block on a slot whose batch waits for a buffer the consumer holds.
  // (A batch whose samples were all skipped submits nothing: read on.)
  // Jobs with no slot are submitted ahead while the stage takes them: the
  // device buffers are their read-ahead (Note [the order on the device] in
  // loader/gather/gather_plan.h).
  if (producer_->inline_mode()) {
    const bool slotless = ring_ == nullptr;
    while ((slotless ? stage_->ReadyForJob() : stage_->Idle()) &&
           producer_->ProduceInline()) {
    }
  }
  absl::StatusOr<TransferStage::Delivery> delivery;
  {
    const NvtxRange range("pinwheel consumer wait");
    delivery = stage_->Next(deadline);
  }
  const absl::Time taken = absl::Now();
  consumer_wait_ += taken - start;
  if (!delivery.ok()) {
    if (absl::IsDeadlineExceeded(delivery.status())) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "batch %d of epoch %d not ready after %s (timeout): a worker is "
          "still reading it",
          delivered_in_epoch_, epoch_, absl::FormatDuration(options_.timeout)));
    }
    return delivery.status();
  }
  switch (delivery->kind) {
    case FilledBatch::Kind::kEndOfEpoch:
      ++epoch_;
      ++epochs_completed_;
      delivered_in_epoch_ = 0;
      source_->EpochEnded();
      producer_->ConsumerReached(epoch_);  // Note [at most two epochs ahead]
      return std::optional<DeviceBatch>();
    case FilledBatch::Kind::kError:
      failed_ = delivery->error;
      return failed_;
    case FilledBatch::Kind::kBatch:
      break;
  }
  const absl::Duration behind_buffers =
      TransferStage::BehindBuffers(*delivery, start, taken);
  latencies_->consumer_wait.Record(taken - start);
  latencies_->data_wait.Record(
      std::max(absl::ZeroDuration(), taken - start - behind_buffers));
  consumer_wait_behind_buffers_ += behind_buffers;
  tuner_->OnBatch(taken - start, step, batches_delivered_ + 1);
  latencies_->ready_wait.Record(taken - delivery->ready_at);
  latencies_->copy.Record(delivery->write_time);
  DeviceBatch& batch = delivery->batch;
  source_->Delivered(batch.info());
  ++batches_delivered_;
  ++delivered_in_epoch_;
  samples_delivered_ += batch.size() - batch.info().padded;
  samples_padded_ += batch.info().padded;
  if (!samples_per_source_.empty()) {
    // Per-source counts (LoaderStats::samples_per_source); the sampler
    // checked every index when the batch was claimed.
    try {
      for (const int64_t index : batch.sample_indices()) {
        if (index < 0) continue;  // padding
        const int source = options_.sampler->SourceOf(index);
        if (source >= 0 &&
            source < static_cast<int>(samples_per_source_.size())) {
          ++samples_per_source_[static_cast<size_t>(source)];
        }
      }
    } catch (...) {
      samples_per_source_.clear();  // a sampler that throws gets no counts
    }
  }
  bytes_delivered_ += static_cast<int64_t>(stage_->CopyBytes(batch.size()));
  last_batch_returned_ = absl::Now();
  return std::optional<DeviceBatch>(std::move(batch));
}

absl::Status LoaderCore::StartEpoch(int64_t epoch) {
  const ConsumerCall call(in_call_, "StartEpoch");
  PINWHEEL_RETURN_IF_ERROR(call.status());
  if (shut_down_) return absl::CancelledError("StartEpoch() after Shutdown()");
  if (epoch < 0 || epoch > Loader::kMaxEpoch) {
    return absl::InvalidArgumentError(
        absl::StrCat("StartEpoch(", epoch, "): epoch must be in 0..",
                     Loader::kMaxEpoch, " (Loader::kMaxEpoch)"));
  }
  if (epoch == epoch_ && delivered_in_epoch_ == 0 && failed_.ok() &&
      restart_failed_.ok()) {
    return absl::OkStatus();
  }
  producer_->Stop();
  absl::Status discarded = stage_->DiscardPending();
  if (!discarded.ok()) {
    // The producer is stopped and stays so: Next() says why until a
    // StartEpoch() succeeds.
    restart_failed_ = absl::Status(
        discarded.code(),
        absl::StrCat("StartEpoch(", epoch, ") failed: ", discarded.message()));
    return restart_failed_;
  }
  if (ring_ != nullptr) ring_->Resume();
  failed_ = absl::OkStatus();
  restart_failed_ = absl::OkStatus();
  epoch_ = epoch;
  delivered_in_epoch_ = 0;
  // StartEpoch() starts whole epochs: the checkpoint's position is spent.
  source_->ForgetResume();
  producer_->Start(epoch);
  return absl::OkStatus();
}

absl::StatusOr<LoaderCheckpoint> LoaderCore::Checkpoint() const {
  const ConsumerCall call(in_call_, "Checkpoint");
  PINWHEEL_RETURN_IF_ERROR(call.status());
  LoaderCheckpoint c;
  c.shuffle = options_.shuffle;
  c.custom_order = options_.sampler != nullptr;
  c.seed = options_.seed;
  c.batch_size = options_.batch_size;
  c.drop_last = options_.drop_last;
  c.drop_uneven_tail = options_.drop_uneven_tail;
  c.world_size = options_.world_size;
  c.rank = options_.rank;
  c.epoch = epoch_;
  PINWHEEL_RETURN_IF_ERROR(source_->Checkpoint(epoch_, delivered_in_epoch_, c));
  return c;
}

LoaderStats LoaderCore::stats() const {
  LoaderStats stats = ConsumerStats();
  AddSharedStats(&stats);
  return stats;
}

LoaderStats LoaderCore::ConsumerStats() const {
  LoaderStats stats;
  stats.batches_delivered = batches_delivered_;
  stats.samples_delivered = samples_delivered_;
  stats.bytes_delivered = bytes_delivered_;
  stats.samples_padded = samples_padded_;
  stats.epochs_completed = epochs_completed_;
  stats.consumer_wait = consumer_wait_;
  stats.consumer_wait_behind_buffers = consumer_wait_behind_buffers_;
  stats.samples_per_source = samples_per_source_;
  // The tuner is the consumer's (it runs in Next()).
  stats.auto_tune = tuner_->stats();
  return stats;
}

void LoaderCore::AddSharedStats(LoaderStats* stats) const {
  stats->transfer = stage_->stats();
  stats->samples_skipped =
      producer_->samples_skipped() + stats->transfer.samples_skipped;
  stats->samples_replaced = producer_->samples_replaced();
  if (stats->samples_replaced > 0)
    stats->last_replaced = producer_->last_replaced();
  if (ring_ != nullptr) stats->ring = ring_->stats();
  stats->pinned_bytes = stats->ring.bytes_pinned;
  stats->device_bytes = stats->transfer.device_bytes;
  stats->gather = gather_.used;
  stats->gather_fallback = gather_.fallback;
  stats->gather_registered_bytes = gather_.registered_bytes;
  stats->gather_order_on_device = gather_.order_on_device;
  stats->latency = latencies_->Snapshot();
}

// Note [abandoning a stuck read]
// A Read that never returns (hung network storage, a deadlocked user lock)
// used to hang Shutdown() and ~Loader forever: they joined the producer
// thread, which waits in its oneTBB pipeline for every worker. The consumer
// must be able to give up on a loader. So Shutdown() waits for the producer
// thread only for options.shutdown_timeout; past it, the thread is detached
// holding a reference to the Pipeline (options, layout, source and dataset,
// ring and its slots, stage, the Producer with its arena and filler): the
// stuck workers write into a slot and touch the dataset and the ring, and
// the producer thread waits for all of them inside the arena, so while it
// holds the Pipeline every thread still working for the loader finds what
// it touches alive. When the last read returns, the stopped pipeline winds
// down, the thread drops its reference, and the Pipeline is freed there.
// Shutdown() names the reads it gave up on (ReadsInFlight). StartEpoch()
// still waits for a stop without bound: it must reuse the ring.
void LoaderCore::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  const absl::Time deadline =
      options_.shutdown_timeout == absl::InfiniteDuration()
          ? absl::InfiniteFuture()
          : absl::Now() + options_.shutdown_timeout;
  std::optional<std::vector<RunningRead>> stuck =
      producer_->StopWithin(deadline, pipeline_);
  stage_->Shutdown();
  if (stuck.has_value()) {
    std::string reads;
    for (const RunningRead& read : *stuck) {
      absl::StrAppend(&reads, reads.empty() ? "" : "; ", read.ToString());
    }
    if (reads.empty()) reads = "the producer thread (OpenShard or worker_init)";
    shutdown_status_ = absl::DeadlineExceededError(absl::StrCat(
        "Shutdown(): still running after shutdown_timeout ",
        absl::FormatDuration(options_.shutdown_timeout),
        ", abandoned (the dataset and the slots they write stay alive until "
        "they return): ",
        reads));
    // Shutdown() returns nothing (and ~Loader calls it): say it where it
    // will be seen, once.
    std::fprintf(stderr, "pinwheel: %s\n", shutdown_status_.ToString().c_str());
  }
}

}  // namespace pinwheel::internal
