// Note [the producer pipeline]
// One producer thread runs epochs back to back. Each epoch is one run of
// the same oneTBB pipeline (RunEpoch) inside the loader's arena
// (num_workers threads, the producer among them), with `prefetch` tokens,
// one per pinned slot, over the loader's BatchSource (map-style or shards:
// the variation lives in the source, as a policy, not in a second pipeline):
//   1. serial, in order: the source claims the epoch's next batch (its
//      BatchInfo is built here, once) and a pinned slot is acquired for it
//      (blocking: back-pressure);
//   2. parallel: the source fills it, the dataset writing each sample
//      straight into the slot (BatchFiller);
//   3. serial, in order (or out of order when the source allows it): submit
//      the slot to the transfer stage.
// Slots are acquired in batch order, so the lowest batch not yet submitted
// always holds a slot: in-order delivery cannot deadlock on the ring.
// Stopping (Shutdown, StartEpoch, a kStop error) is checked before every
// sample: a batch left half-read is abandoned and its slot recycled, so a
// stop waits for at most one sample read per worker thread.
// Every call into user code (Read, OpenShard, SampleStream::Next,
// worker_init) goes through CallUser(): what it throws becomes a Status
// naming where. worker_init runs where the dataset is called (before each
// sample, a thread-local check on the fast path), keyed by producer start,
// thread and arena slot: see LoaderOptions::worker_init for the contract.
// The stages run on oneTBB's threads: what one stage hands the next is
// released by the writer and acquired by the reader (see Note
// [ThreadSanitizer and the system libraries]).
//
// Note [at most two epochs ahead]
// The ring bounds how far workers read ahead in batches, but an epoch with
// no batch (every shard empty, every sample skipped) takes no slot: the
// producer would run through empty epochs as fast as it can, queueing an
// end-of-epoch marker for each. So before producing epoch e the producer
// waits until the consumer reads epoch e - 1: it works on the epoch after
// the consumer's at most, and at most two end-of-epoch markers are queued.
// An empty epoch thus costs one pass over the shards (or samples) per
// Next() that ends it, and nothing while the consumer is away.
#include "loader/pipeline/producer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/parallel_pipeline.h"

#include "loader/internal/numa.h"
#include "loader/loader.h"
#include "pinning/base/mutex.h"
#include "pinning/base/nvtx_range.h"
#include "pinning/base/thread_cpus.h"

namespace pinwheel::internal {
namespace {

// oneTBB limits all arenas to the machine's cores by default; a loader asked
// for more workers (reads that wait on storage) gets them.
void AllowWorkers(int num_workers) {
  static absl::Mutex mu(absl::kConstInit);
  static std::unique_ptr<tbb::global_control> control;
  static size_t allowed = 0;
  const size_t wanted =
      std::max<size_t>(static_cast<size_t>(num_workers) + 1,
                       tbb::global_control::active_value(
                           tbb::global_control::max_allowed_parallelism));
  MutexLock lock(&mu);
  if (wanted <= allowed) return;
  control.reset();
  control = std::make_unique<tbb::global_control>(
      tbb::global_control::max_allowed_parallelism, wanted);
  allowed = wanted;
}

}  // namespace

absl::Status PastTheLastEpoch(int64_t epoch) {
  return absl::OutOfRangeError(absl::StrCat("epoch ", epoch,
                                            " is past the last one, "
                                            "Loader::kMaxEpoch = ",
                                            Loader::kMaxEpoch));
}

Producer::Producer(const LoaderOptions& options, int workers,
                   const std::vector<int>& worker_cpus, const Device& device,
                   const BatchLayout& layout, PinnedRing* ring,
                   TransferStage* stage, BatchSource* source,
                   LatencyRecorder* latencies)
    : options_(options),
      ring_(ring),
      stage_(stage),
      source_(source),
      latencies_(latencies),
      inline_(workers == 0 && source->reads_inline()),
      worker_init_(options.worker_init, inline_, std::max(1, workers)),
      filler_(layout, options, inline_, worker_init_, stop_),
      worker_cpus_(worker_cpus) {
  if (!inline_) {
    AllowWorkers(std::max(1, workers));
    arena_ = MakeWorkerArena(NumaPlacementFor(device), std::max(1, workers));
    arena_->initialize();
    if (!worker_cpus.empty()) {
      arena_cpus_ = std::make_unique<ArenaCpus>(*arena_, worker_cpus);
    }
  }
}

Producer::~Producer() { Stop(); }

void Producer::Start(int64_t first_epoch) {
  worker_init_.StartRun();
  {
    MutexLock lock(&epoch_mu_);
    consumer_epoch_ = first_epoch;
    stop_.Set(false);
  }
  if (inline_) {
    inline_epoch_ = first_epoch;
    inline_epoch_started_ = false;
    inline_epoch_done_ = false;
    return;
  }
  {
    MutexLock lock(&exit_mu_);
    loop_done_ = false;
  }
  thread_ = std::thread([this, first_epoch] {
    Loop(first_epoch);
    std::shared_ptr<const void> keep_alive;
    {
      MutexLock lock(&exit_mu_);
      loop_done_ = true;
      keep_alive = std::move(keep_alive_);
    }
    // Abandoned by StopWithin(): this may free the Producer; touch nothing.
  });
  if (!worker_cpus_.empty()) {
    CpuMask(worker_cpus_).ApplyTo(thread_.native_handle());
  }
}

void Producer::RequestStop() {
  {
    MutexLock lock(&epoch_mu_);  // wakes AwaitConsumerNear()
    stop_.Set(true);
  }
  source_->Interrupt();
  if (ring_ != nullptr) ring_->Cancel();
  if (gate_ != nullptr) gate_->Wake();
}

void Producer::Stop() {
  RequestStop();
  if (thread_.joinable()) thread_.join();
  worker_init_.Quiesce();
  inline_epoch_done_ = true;
}

std::optional<std::vector<RunningRead>> Producer::StopWithin(
    absl::Time deadline, std::shared_ptr<const void> keep_alive) {
  RequestStop();
  if (thread_.joinable()) {
    MutexLock lock(&exit_mu_);
    const bool done = AwaitWithDeadline(
        exit_mu_,
        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(exit_mu_) { return loop_done_; },
        deadline);
    if (!done) {
      // Still inside user code: leave the thread what it touches.
      keep_alive_ = std::move(keep_alive);
      thread_.detach();
      return filler_.RunningReads();
    }
  }
  Stop();
  return std::nullopt;
}

void Producer::ConsumerReached(int64_t epoch) {
  MutexLock lock(&epoch_mu_);
  consumer_epoch_ = epoch;
}

bool Producer::AwaitConsumerNear(int64_t epoch) {
  MutexLock lock(&epoch_mu_);
  auto near = [this, epoch]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(epoch_mu_) {
    return stop_.stopping() || consumer_epoch_ >= epoch - 1;
  };
  Await(epoch_mu_, near);
  return !stop_.stopping();
}

void Producer::Fail(int64_t epoch, absl::Status error) {
  FilledBatch failed;
  failed.kind = FilledBatch::Kind::kError;
  failed.info.epoch = epoch;
  failed.error = std::move(error);
  stop_.Set(true);
  stage_->Submit(std::move(failed));
}

void Producer::SubmitEndOfEpoch(int64_t epoch) {
  FilledBatch end;
  end.kind = FilledBatch::Kind::kEndOfEpoch;
  end.info.epoch = epoch;
  stage_->Submit(std::move(end));
}

void Producer::Loop(int64_t first_epoch) {
  for (int64_t epoch = first_epoch; AwaitConsumerNear(epoch); ++epoch) {
    if (epoch > Loader::kMaxEpoch) {
      Fail(epoch, PastTheLastEpoch(epoch));
      return;
    }
    RunEpoch(epoch);
    if (stop_.stopping()) return;
    SubmitEndOfEpoch(epoch);
  }
}

void Producer::RunEpoch(int64_t epoch) {
  // On the producer thread, in its arena slot (worker_init may run there).
  absl::Status started;
  TsanRelease(&started);
  arena_->execute([&] {
    TsanAcquire(&started);
    started = source_->StartEpoch(epoch, worker_init_);
    TsanRelease(&started);
  });
  TsanAcquire(&started);
  if (!started.ok()) {
    Fail(epoch, std::move(started));
    source_->EndEpoch();
    return;
  }
  const auto last_mode = source_->in_order()
                             ? tbb::filter_mode::serial_in_order
                             : tbb::filter_mode::serial_out_of_order;
  // What the serial stages keep between their runs on different threads.
  int first_stage = 0;
  int last_stage = 0;
  // A slot that could not be had other than by a stop (a ring growing under
  // prefetch = kAuto whose allocation failed): delivered after the epoch's
  // batches so far, never dropped.
  absl::Status slot_error;
  TsanRelease(&first_stage);
  TsanRelease(&last_stage);
  arena_->execute([&] {
    tbb::parallel_pipeline(
        static_cast<size_t>(options_.prefetch),
        tbb::make_filter<void, ProducedBatch*>(
            tbb::filter_mode::serial_in_order,
            [&](tbb::flow_control& control) -> ProducedBatch* {
              TsanAcquire(&first_stage);
              auto batch = std::make_unique<ProducedBatch>();
              bool claimed = !stop_.stopping() && source_->Claim(stop_, *batch);
              if (claimed) {
                absl::StatusOr<PinnedRing::Slot> slot = AcquireSlot();
                if (slot.ok()) {
                  batch->slot = *slot;
                } else {  // cancelled (shutting down), or out of memory
                  if (!absl::IsCancelled(slot.status())) {
                    slot_error = slot.status();
                  }
                  source_->Unclaim(*batch);
                  claimed = false;
                }
              }
              TsanRelease(&first_stage);
              if (!claimed) {
                control.stop();
                return nullptr;
              }
              TsanRelease(batch.get());
              return batch.release();
            }) &
            tbb::make_filter<ProducedBatch*, ProducedBatch*>(
                tbb::filter_mode::parallel,
                [&](ProducedBatch* batch) {
                  TsanAcquire(batch);
                  if (!stop_.stopping()) {
                    Fill(*batch);
                  } else {
                    source_->Unclaim(*batch);
                  }
                  TsanRelease(batch);
                  return batch;
                }) &
            tbb::make_filter<ProducedBatch*, void>(
                last_mode, [&](ProducedBatch* batch) {
                  TsanAcquire(batch);
                  TsanAcquire(&last_stage);
                  std::unique_ptr<ProducedBatch> owned(batch);
                  if (!RecycleIfStopping(*batch)) {
                    source_->PrepareDelivery(*batch);
                    Deliver(*batch);
                  }
                  TsanRelease(&last_stage);
                }));
  });
  TsanAcquire(&first_stage);
  TsanAcquire(&last_stage);
  if (!slot_error.ok() && !stop_.stopping()) {
    Fail(epoch, absl::Status(slot_error.code(),
                             absl::StrCat("epoch ", epoch, ": a pinned slot: ",
                                          slot_error.message())));
  }
  source_->EndEpoch();
}

bool Producer::ClaimInline(ProducedBatch& batch) {
  if (!inline_epoch_started_) {
    // The dataset's StartEpoch() may fail (a plan it could not make): the
    // loader stops with it, as on the worker path (RunEpoch).
    absl::Status started = source_->StartEpoch(inline_epoch_, worker_init_);
    if (!started.ok()) {
      Fail(inline_epoch_, std::move(started));
      inline_epoch_done_ = true;
      return false;
    }
    inline_epoch_started_ = true;
  }
  if (source_->Claim(stop_, batch)) return true;
  SubmitEndOfEpoch(inline_epoch_);
  // Prepare the next epoch; it starts when the consumer asks again.
  if (inline_epoch_ >= Loader::kMaxEpoch) {
    inline_epoch_done_ = true;  // Next() reports it (see LoaderCore::Next)
  } else {
    ++inline_epoch_;
    inline_epoch_started_ = false;
  }
  return false;
}

bool Producer::ProduceInline() {
  if (inline_epoch_done_) return false;
  ProducedBatch batch;
  if (!ClaimInline(batch)) return false;  // the epoch's end, queued
  if (ring_ == nullptr) {
    // A job with no slot: the stage's writer makes the batch from its
    // BatchInfo (Note [the order on the device] in
    // loader/gather/gather_plan.h).
    batch.info.samples = static_cast<int64_t>(batch.info.sample_indices.size());
    stage_->Submit({.info = std::move(batch.info)},
                   TransferStage::Submitter::kConsumer);
    return true;
  }
  absl::StatusOr<PinnedRing::Slot> slot = AcquireSlot();
  if (!slot.ok()) {
    source_->Unclaim(batch);
    return false;
  }
  batch.slot = *slot;
  Fill(batch);
  Deliver(batch);
  if (stop_.stopping()) inline_epoch_done_ = true;
  return true;
}

absl::StatusOr<PinnedRing::Slot> Producer::AcquireSlot() {
  const NvtxRange range("pinwheel slot wait");
  const absl::Time start = absl::Now();
  absl::StatusOr<PinnedRing::Slot> slot = ring_->Acquire();
  if (slot.ok()) latencies_->slot_wait.Record(absl::Now() - start);
  return slot;
}

void Producer::Fill(ProducedBatch& batch) {
  const NvtxRange range("pinwheel read");
  const absl::Time start = absl::Now();
  source_->Fill(filler_, batch);
  // A batch left half-read by a stop says nothing about the reads.
  if (!batch.abandoned) latencies_->read.Record(absl::Now() - start);
}

void Producer::Deliver(ProducedBatch& batch) {
  FilledBatch filled;
  filled.slot = batch.slot.index;
  if (!batch.status.ok()) {
    filled.kind = FilledBatch::Kind::kError;
    filled.info.epoch = batch.info.epoch;
    filled.info.index = batch.info.index;
    filled.error = std::move(batch.status);
    // Errors stop the loader unless samples are skipped; stream errors stop.
    stop_.Set(true);
  } else if (batch.info.samples == 0 || batch.abandoned) {
    // Every sample skipped or dropped, or left half-read by a stop.
    ring_->Recycle(batch.slot.index, nullptr);
    return;
  } else {
    filled.info = std::move(batch.info);
  }
  // Note [copy issued by the submitter] in transfer/transfer_stage.cc.
  const TransferStage::Submitter submitter =
      inline_ ? TransferStage::Submitter::kConsumer
              : TransferStage::Submitter::kWorker;
  stage_->Submit(std::move(filled), submitter);
}

bool Producer::RecycleIfStopping(const ProducedBatch& batch) {
  if (!stop_.stopping() || !batch.status.ok()) return false;
  ring_->Recycle(batch.slot.index, nullptr);  // read, but no one will take it
  return true;
}

}  // namespace pinwheel::internal
