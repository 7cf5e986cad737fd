// Note [the producer pipeline]
// One producer thread runs epochs back to back. Each epoch is a oneTBB
// parallel_pipeline inside the loader's arena (num_workers threads, the
// producer among them), with `prefetch` tokens, one per pinned slot:
//   1. serial, in order: take the next batch of the sampler's order and
//      acquire a pinned slot for it (blocking: back-pressure);
//   2. parallel: the dataset writes each sample straight into the slot (a
//      nested, isolated parallel_for over samples keeps all workers busy when
//      there are fewer slots than workers);
//   3. serial, in order (or out of order on request): submit the slot to the
//      transfer stage.
// Slots are acquired in batch order, so the lowest batch not yet submitted
// always holds a slot: in-order delivery cannot deadlock on the ring.
// The nested parallel_for runs under this_task_arena::isolate so a thread
// waiting for it never picks up a stage-1 task (which may block on the ring
// while holding up the very batch the ring waits for).
#include "loader/internal/loader_core.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <typeinfo>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "loader/internal/numa.h"
#include "pinning/internal/tsan.h"
#include "oneapi/tbb/blocked_range.h"
#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/parallel_for.h"
#include "oneapi/tbb/parallel_pipeline.h"
#include "oneapi/tbb/task_scheduler_observer.h"
#include "pinning/status_macros.h"

namespace pinwheel::internal {

// A batch travelling through the pipeline.
struct ProducedBatch {
  int64_t epoch = 0;
  int64_t index = 0;
  PinnedRing::Slot slot;
  std::vector<int64_t> indices;  // map-style: the sampler's indices
  int shard = -1;                // iterable: the shard it reads from
  int64_t samples = 0;
  absl::Status status;
};

// Runs the per-worker init hook when a thread enters the arena.
class WorkerObserver final : public tbb::task_scheduler_observer {
 public:
  WorkerObserver(tbb::task_arena& arena, LoaderCore* core)
      : tbb::task_scheduler_observer(arena), core_(core) {}
  void on_scheduler_entry(bool) override {
    TsanAcquire(this);  // see Note [ThreadSanitizer and the system libraries]
    core_->InitWorkerIfNeeded().IgnoreError();  // reported with its batch
    TsanRelease(this);
  }

 private:
  LoaderCore* core_;
};

struct LoaderCore::Shard {
  std::unique_ptr<SampleStream> stream;
  absl::Mutex mu;
  bool busy ABSL_GUARDED_BY(mu) = false;
  std::atomic<bool> done{false};
};

namespace {

// oneTBB limits all arenas to the machine's cores by default; a loader asked
// for more workers (reads that wait on storage) gets them.
void AllowWorkers(int num_workers) {
  static absl::Mutex mu(absl::kConstInit);
  static std::unique_ptr<tbb::global_control> control;
  static size_t allowed = 0;
  const size_t wanted = std::max<size_t>(
      static_cast<size_t>(num_workers) + 1,
      tbb::global_control::active_value(
          tbb::global_control::max_allowed_parallelism));
  MutexLock lock(&mu);
  if (wanted <= allowed) return;
  control.reset();
  control = std::make_unique<tbb::global_control>(
      tbb::global_control::max_allowed_parallelism, wanted);
  allowed = wanted;
}

std::string BatchName(int64_t position, int64_t batch, int64_t epoch) {
  return absl::StrCat("sample ", position, " of batch ", batch, ", epoch ",
                      epoch);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoaderCore>> LoaderCore::Create(
    const LoaderOptions& options, Device device,
    std::shared_ptr<const Dataset> dataset,
    std::shared_ptr<const IterableDataset> iterable) {
  const SampleLayout& sample =
      dataset != nullptr ? dataset->layout() : iterable->layout();
  PINWHEEL_ASSIGN_OR_RETURN(BatchLayout layout,
                            BatchLayout::Create(sample, options.batch_size));
  std::optional<BatchSampler> sampler;
  if (dataset != nullptr) {
    std::unique_ptr<Sampler> order;
    if (options.world_size > 1) {
      PINWHEEL_ASSIGN_OR_RETURN(
          order, DistributedSampler::Create(
                     dataset->size(), options.rank, options.world_size,
                     options.shuffle, options.seed, options.drop_uneven_tail));
    } else if (options.shuffle) {
      order = std::make_unique<RandomSampler>(dataset->size(), options.seed);
    } else {
      order = std::make_unique<SequentialSampler>(dataset->size());
    }
    PINWHEEL_ASSIGN_OR_RETURN(
        BatchSampler batches,
        BatchSampler::Create(std::move(order), options.batch_size,
                             options.drop_last));
    sampler.emplace(std::move(batches));
  }
  const HostMemoryKind memory = device.is_cuda() && options.pin_memory
                                    ? HostMemoryKind::kPageLocked
                                    : HostMemoryKind::kPageable;
  absl::StatusOr<std::unique_ptr<PinnedRing>> ring;
  RunOnNumaNode(NumaPlacementFor(device), [&] {  // first-touched on the GPU's node
    ring = PinnedRing::Create(
        {.slots = options.prefetch, .slot_bytes = layout.slot_bytes(),
         .memory = memory,
         .cuda_device = device.is_cuda() ? device.ordinal() : -1});
  });
  if (!ring.ok()) {
    return absl::Status(
        ring.status().code(),
        absl::StrCat("prefetch = ", options.prefetch, " slots of batch_size ",
                     options.batch_size, " × ", sample.sample_bytes(),
                     " bytes per sample (", sample.ToString(), "): ",
                     ring.status().message()));
  }
  absl::StatusOr<std::unique_ptr<TransferStage>> stage = TransferStage::Create(
      device, ring->get(), layout, options.device_buffers);
  if (!stage.ok()) {
    return absl::Status(
        stage.status().code(),
        absl::StrCat("device_buffers = ", options.device_buffers, ": ",
                     stage.status().message()));
  }
  std::unique_ptr<LoaderCore> core(new LoaderCore(
      options, device, std::move(dataset), std::move(iterable),
      std::move(layout), *std::move(ring), *std::move(stage),
      std::move(sampler)));
  core->StartProducer(0);
  return core;
}

LoaderCore::LoaderCore(const LoaderOptions& options, Device device,
                       std::shared_ptr<const Dataset> dataset,
                       std::shared_ptr<const IterableDataset> iterable,
                       BatchLayout layout, std::unique_ptr<PinnedRing> ring,
                       std::unique_ptr<TransferStage> stage,
                       std::optional<BatchSampler> sampler)
    : options_(options),
      device_(device),
      dataset_(std::move(dataset)),
      iterable_(std::move(iterable)),
      layout_(std::move(layout)),
      ring_(std::move(ring)),
      stage_(std::move(stage)),
      sampler_(std::move(sampler)),
      inline_(options_.num_workers == 0 && dataset_ != nullptr) {
  if (!inline_) {
    const int workers = std::max(1, options_.num_workers);
    AllowWorkers(workers);
    arena_ = MakeWorkerArena(NumaPlacementFor(device_), workers);
    arena_->initialize();
    if (options_.worker_init) {
      observer_ = std::make_unique<WorkerObserver>(*arena_, this);
      TsanRelease(observer_.get());
      observer_->observe(true);
    }
  }
}

LoaderCore::~LoaderCore() { Shutdown(); }

int64_t LoaderCore::batches_per_epoch() const {
  return sampler_ ? sampler_->batches_per_epoch() : -1;
}

absl::Status LoaderCore::InitWorkerIfNeeded() {
  if (!options_.worker_init) return absl::OkStatus();
  int number;
  {
    MutexLock lock(&mu_);
    if (!init_error_.ok()) return init_error_;
    if (!initialized_.insert(std::this_thread::get_id()).second) {
      return absl::OkStatus();
    }
    number = next_worker_number_++;
  }
  absl::Status status;
  try {
    status = options_.worker_init(number);
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("threw ", e.what()));
  } catch (...) {
    status = absl::InternalError("threw a non-standard exception");
  }
  if (status.ok()) return status;
  status = absl::Status(status.code(),
                        absl::StrCat("worker_init failed for worker ", number,
                                     ": ", status.message()));
  MutexLock lock(&mu_);
  if (init_error_.ok()) init_error_ = status;
  return status;
}

absl::Status LoaderCore::ReadOne(int64_t index, SampleView& view) const {
  try {
    return dataset_->Read(index, view);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("Read threw ", e.what()));
  } catch (...) {
    return absl::InternalError("Read threw a non-standard exception");
  }
}

// Writes every sample of `batch` into its slot; on failure sets
// batch.status (kStop) or compacts the batch without the failed samples
// (kSkipSample).
void LoaderCore::Fill(ProducedBatch& batch) {
  if (iterable_ != nullptr) {
    FillFromStream(batch);
    return;
  }
  const int64_t n = static_cast<int64_t>(batch.indices.size());
  batch.samples = n;
  std::vector<absl::Status> failures(static_cast<size_t>(n));
  const SampleLayout& sample = layout_.sample();
  bool variable = false;
  for (const FieldSpec& f : sample.fields()) variable |= f.variable_length;
  auto read_range = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      SampleView view(layout_, batch.slot.data, p, batch.indices[p]);
      if (variable) {
        for (int f = 0; f < sample.num_fields(); ++f) {
          if (sample.fields()[f].variable_length) {
            view.set_length(f, sample.fields()[f].shape[0]);
          }
        }
      }
      absl::Status status = ReadOne(batch.indices[p], view);
      if (status.ok() && variable) {
        for (int f = 0; f < sample.num_fields(); ++f) {
          const FieldSpec& spec = sample.fields()[f];
          if (!spec.variable_length) continue;
          const int64_t length = view.length(f);
          if (length < 0 || length > spec.shape[0]) {
            status = absl::OutOfRangeError(absl::StrCat(
                "length ", length, " set for field '", spec.name,
                "' is outside 0..", spec.shape[0]));
            break;
          }
          // Zero the padding: the slot holds an older batch's bytes.
          const size_t row = spec.bytes() / static_cast<size_t>(spec.shape[0]);
          absl::Span<std::byte> bytes = view.field(f);
          std::memset(bytes.data() + row * static_cast<size_t>(length), 0,
                      bytes.size() - row * static_cast<size_t>(length));
        }
      }
      failures[p] = std::move(status);
    }
  };
  const size_t sample_bytes = std::max<size_t>(1, sample.sample_bytes());
  const int64_t grain =
      std::max<int64_t>(1, static_cast<int64_t>((256 << 10) / sample_bytes));
  if (!inline_ && n > grain) {
    // The chunks run on other threads: see Note [ThreadSanitizer and the
    // system libraries].
    TsanRelease(&failures);
    tbb::this_task_arena::isolate([&] {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                        [&](const tbb::blocked_range<int64_t>& r) {
                          TsanAcquire(&failures);
                          read_range(r.begin(), r.end());
                          TsanRelease(&failures);
                        });
    });
    TsanAcquire(&failures);
  } else {
    read_range(0, n);
  }
  int64_t failed = 0;
  for (const absl::Status& s : failures) failed += s.ok() ? 0 : 1;
  if (failed == 0) return;
  if (options_.on_error == ErrorPolicy::kStop) {
    for (int64_t p = 0; p < n; ++p) {
      if (failures[p].ok()) continue;
      batch.status = absl::Status(
          failures[p].code(),
          absl::StrCat("dataset Read failed for index ", batch.indices[p], " (",
                       BatchName(p, batch.index, batch.epoch),
                       "): ", failures[p].message()));
      return;
    }
  }
  // kSkipSample: move the good samples down, field by field.
  int64_t kept = 0;
  std::vector<int64_t> kept_indices;
  for (int64_t p = 0; p < n; ++p) {
    if (!failures[p].ok()) continue;
    if (kept != p) {
      for (int f = 0; f < layout_.num_fields(); ++f) {
        const size_t bytes = layout_.fields()[f].bytes();
        std::byte* base = batch.slot.data + layout_.field_offset(f);
        std::memmove(base + bytes * static_cast<size_t>(kept),
                     base + bytes * static_cast<size_t>(p), bytes);
      }
    }
    kept_indices.push_back(batch.indices[p]);
    ++kept;
  }
  samples_skipped_.fetch_add(failed, std::memory_order_relaxed);
  batch.indices = std::move(kept_indices);
  batch.samples = kept;
}

void LoaderCore::FillFromStream(ProducedBatch& batch) {
  Shard& shard = *shards_[batch.shard];
  int64_t p = 0;
  for (; p < options_.batch_size; ++p) {
    SampleView view(layout_, batch.slot.data, p, -1);
    absl::StatusOr<bool> more;
    try {
      more = shard.stream->Next(view);
    } catch (const std::exception& e) {
      more = absl::InternalError(absl::StrCat("Next threw ", e.what()));
    }
    if (!more.ok()) {
      batch.status = absl::Status(
          more.status().code(),
          absl::StrCat("iterable dataset shard ", batch.shard, " failed at ",
                       BatchName(p, batch.index, batch.epoch), ": ",
                       more.status().message()));
      shard.done.store(true);
      break;
    }
    if (!*more) {
      shard.done.store(true);
      break;
    }
  }
  batch.samples = p;
  batch.indices.assign(static_cast<size_t>(p), -1);
  MutexLock lock(&shard.mu);
  shard.busy = false;
}

void LoaderCore::Deliver(ProducedBatch& batch) {
  FilledBatch filled;
  filled.epoch = batch.epoch;
  filled.index = batch.index;
  filled.slot = batch.slot.index;
  if (!batch.status.ok()) {
    filled.kind = FilledBatch::Kind::kError;
    filled.error = std::move(batch.status);
    // Errors stop the loader unless samples are skipped; stream errors stop.
    stop_.store(true, std::memory_order_release);
  } else if (batch.samples == 0) {
    ring_->Recycle(batch.slot.index, nullptr);  // every sample skipped
    return;
  } else {
    filled.samples = batch.samples;
    filled.sample_indices = std::move(batch.indices);
  }
  stage_->Submit(std::move(filled));
}

bool LoaderCore::RecycleIfStopping(const ProducedBatch& batch) {
  if (!stopping() || !batch.status.ok()) return false;
  ring_->Recycle(batch.slot.index, nullptr);  // read, but no one will take it
  return true;
}

void LoaderCore::StartProducer(int64_t first_epoch) {
  stop_.store(false, std::memory_order_release);
  if (inline_) {
    inline_epoch_ = first_epoch;
    inline_epoch_done_ = false;
    inline_next_ = 0;
    inline_batches_ = sampler_->Batches(first_epoch);
    return;
  }
  producer_ = std::thread([this, first_epoch] { ProducerLoop(first_epoch); });
}

void LoaderCore::StopProducer() {
  stop_.store(true, std::memory_order_release);
  ring_->Cancel();
  if (producer_.joinable()) producer_.join();
  inline_epoch_done_ = true;
}

void LoaderCore::ProducerLoop(int64_t first_epoch) {
  for (int64_t epoch = first_epoch; !stopping(); ++epoch) {
    if (iterable_ != nullptr) {
      RunEpochIterable(epoch);
    } else {
      RunEpochMapStyle(epoch);
    }
    if (stopping()) return;
    FilledBatch end;
    end.kind = FilledBatch::Kind::kEndOfEpoch;
    end.epoch = epoch;
    stage_->Submit(std::move(end));
  }
}

void LoaderCore::RunEpochMapStyle(int64_t epoch) {
  const std::vector<std::vector<int64_t>> batches = sampler_->Batches(epoch);
  size_t next = 0;
  const auto last_mode = options_.in_order ? tbb::filter_mode::serial_in_order
                                           : tbb::filter_mode::serial_out_of_order;
  // Stages run on oneTBB's threads: each acquires what the previous one
  // released (see Note [ThreadSanitizer and the system libraries]).
  TsanRelease(&next);
  arena_->execute([&] {
    tbb::parallel_pipeline(
        static_cast<size_t>(options_.prefetch),
        tbb::make_filter<void, ProducedBatch*>(
            tbb::filter_mode::serial_in_order,
            [&](tbb::flow_control& control) -> ProducedBatch* {
              TsanAcquire(&next);
              if (stopping() || next >= batches.size()) {
                TsanRelease(&next);
                control.stop();
                return nullptr;
              }
              absl::StatusOr<PinnedRing::Slot> slot = ring_->Acquire();
              if (!slot.ok()) {  // cancelled: shutting down
                TsanRelease(&next);
                control.stop();
                return nullptr;
              }
              auto* batch = new ProducedBatch;
              batch->epoch = epoch;
              batch->index = static_cast<int64_t>(next);
              batch->slot = *slot;
              batch->indices = batches[next++];
              TsanRelease(&next);
              TsanRelease(batch);
              return batch;
            }) &
            tbb::make_filter<ProducedBatch*, ProducedBatch*>(
                tbb::filter_mode::parallel,
                [&](ProducedBatch* batch) {
                  TsanAcquire(batch);
                  batch->status = InitWorkerIfNeeded();
                  if (batch->status.ok() && !stopping()) Fill(*batch);
                  TsanRelease(batch);
                  return batch;
                }) &
            tbb::make_filter<ProducedBatch*, void>(
                last_mode, [&](ProducedBatch* batch) {
                  TsanAcquire(batch);
                  std::unique_ptr<ProducedBatch> owned(batch);
                  if (!RecycleIfStopping(*batch)) Deliver(*batch);
                }));
  });
  TsanAcquire(&next);
}

void LoaderCore::RunEpochIterable(int64_t epoch) {
  const int per_rank = std::max(1, options_.num_workers);
  const int num_shards = per_rank * options_.world_size;
  shards_.clear();
  for (int i = 0; i < per_rank; ++i) {
    const int shard = options_.rank * per_rank + i;
    auto s = std::make_unique<Shard>();
    absl::StatusOr<std::unique_ptr<SampleStream>> stream =
        iterable_->OpenShard(shard, num_shards, epoch);
    if (!stream.ok()) {
      FilledBatch failed;
      failed.kind = FilledBatch::Kind::kError;
      failed.epoch = epoch;
      failed.error = absl::Status(
          stream.status().code(),
          absl::StrCat("opening shard ", shard, " of ", num_shards,
                       " for epoch ", epoch, ": ", stream.status().message()));
      stop_.store(true, std::memory_order_release);
      stage_->Submit(std::move(failed));
      return;
    }
    s->stream = *std::move(stream);
    shards_.push_back(std::move(s));
  }
  int64_t next_index = 0;
  int64_t delivered = 0;
  size_t turn = 0;
  TsanRelease(&turn);
  TsanRelease(&delivered);
  arena_->execute([&] {
    tbb::parallel_pipeline(
        static_cast<size_t>(options_.prefetch),
        tbb::make_filter<void, ProducedBatch*>(
            tbb::filter_mode::serial_in_order,
            [&](tbb::flow_control& control) -> ProducedBatch* {
              // Round-robin over the shards not yet exhausted; one batch of a
              // shard in flight at a time, so each reads its samples in order.
              TsanAcquire(&turn);
              int chosen = -1;
              while (!stopping()) {
                bool any = false;
                for (size_t k = 0; k < shards_.size() && chosen < 0; ++k) {
                  const size_t s = (turn + k) % shards_.size();
                  if (shards_[s]->done.load()) continue;
                  any = true;
                  Shard& shard = *shards_[s];
                  MutexLock lock(&shard.mu);
                  auto idle = [&shard]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                    return !shard.busy || shard.done.load();
                  };
                  AwaitWithDeadline(shard.mu, idle,
                                    absl::Now() + absl::Milliseconds(10));
                  if (shard.done.load() || shard.busy) break;
                  shard.busy = true;
                  chosen = static_cast<int>(s);
                  turn = s + 1;
                }
                if (chosen >= 0 || !any) break;
              }
              if (chosen < 0) {
                TsanRelease(&turn);
                control.stop();
                return nullptr;
              }
              absl::StatusOr<PinnedRing::Slot> slot = ring_->Acquire();
              if (!slot.ok()) {
                TsanRelease(&turn);
                control.stop();
                return nullptr;
              }
              auto* batch = new ProducedBatch;
              batch->epoch = epoch;
              batch->index = next_index++;
              batch->slot = *slot;
              batch->shard = chosen;
              TsanRelease(&turn);
              TsanRelease(batch);
              return batch;
            }) &
            tbb::make_filter<ProducedBatch*, ProducedBatch*>(
                tbb::filter_mode::parallel,
                [&](ProducedBatch* batch) {
                  TsanAcquire(batch);
                  batch->status = InitWorkerIfNeeded();
                  if (batch->status.ok() && !stopping()) {
                    Fill(*batch);
                  } else {
                    MutexLock lock(&shards_[batch->shard]->mu);
                    shards_[batch->shard]->busy = false;
                  }
                  TsanRelease(batch);
                  return batch;
                }) &
            tbb::make_filter<ProducedBatch*, void>(
                tbb::filter_mode::serial_in_order, [&](ProducedBatch* batch) {
                  TsanAcquire(batch);
                  TsanAcquire(&delivered);
                  std::unique_ptr<ProducedBatch> owned(batch);
                  if (!RecycleIfStopping(*batch)) {
                    if (batch->status.ok() && batch->samples > 0) {
                      batch->index = delivered++;  // no gaps for empty reads
                    }
                    Deliver(*batch);
                  }
                  TsanRelease(&delivered);
                }));
  });
  TsanAcquire(&turn);
  TsanAcquire(&delivered);
}

bool LoaderCore::ProduceInline() {
  if (inline_epoch_done_) return false;
  if (inline_next_ >= inline_batches_.size()) {
    FilledBatch end;
    end.kind = FilledBatch::Kind::kEndOfEpoch;
    end.epoch = inline_epoch_;
    stage_->Submit(std::move(end));
    // Prepare the next epoch; it starts when the consumer asks again.
    ++inline_epoch_;
    inline_batches_ = sampler_->Batches(inline_epoch_);
    inline_next_ = 0;
    return true;
  }
  absl::StatusOr<PinnedRing::Slot> slot = ring_->Acquire();
  if (!slot.ok()) return false;
  ProducedBatch batch;
  batch.epoch = inline_epoch_;
  batch.index = static_cast<int64_t>(inline_next_);
  batch.slot = *slot;
  batch.indices = inline_batches_[inline_next_++];
  Fill(batch);
  Deliver(batch);
  if (stopping()) inline_epoch_done_ = true;
  return true;
}

absl::StatusOr<std::optional<DeviceBatch>> LoaderCore::Next() {
  if (shut_down_) return absl::CancelledError("Next() after Shutdown()");
  if (!failed_.ok()) return failed_;
  const absl::Time start = absl::Now();
  const absl::Time deadline = options_.timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : start + options_.timeout;
  // Inline mode reads a batch only when none is on its way: reading ahead
  // could block on a slot whose batch waits for a buffer the consumer holds.
  // (A batch whose samples were all skipped submits nothing: read on.)
  if (inline_) {
    while (stage_->Idle() && ProduceInline()) {
    }
  }
  absl::StatusOr<TransferStage::Delivery> delivery = stage_->Next(deadline);
  consumer_wait_ += absl::Now() - start;
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
      return std::optional<DeviceBatch>();
    case FilledBatch::Kind::kError:
      failed_ = delivery->error;
      return failed_;
    case FilledBatch::Kind::kBatch:
      break;
  }
  DeviceBatch& batch = delivery->batch;
  ++batches_delivered_;
  ++delivered_in_epoch_;
  samples_delivered_ += batch.size();
  bytes_delivered_ += static_cast<int64_t>(layout_.CopyBytes(batch.size()));
  return std::optional<DeviceBatch>(std::move(batch));
}

absl::Status LoaderCore::StartEpoch(int64_t epoch) {
  if (shut_down_) return absl::CancelledError("StartEpoch() after Shutdown()");
  if (epoch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("StartEpoch(", epoch, "): epoch must be >= 0"));
  }
  if (epoch == epoch_ && delivered_in_epoch_ == 0 && failed_.ok()) {
    return absl::OkStatus();
  }
  StopProducer();
  PINWHEEL_RETURN_IF_ERROR(stage_->DiscardPending());
  ring_->Resume();
  failed_ = absl::OkStatus();
  {
    MutexLock lock(&mu_);
    init_error_ = absl::OkStatus();
  }
  epoch_ = epoch;
  delivered_in_epoch_ = 0;
  StartProducer(epoch);
  return absl::OkStatus();
}

LoaderStats LoaderCore::stats() const {
  LoaderStats stats;
  stats.batches_delivered = batches_delivered_;
  stats.samples_delivered = samples_delivered_;
  stats.bytes_delivered = bytes_delivered_;
  stats.samples_skipped = samples_skipped_.load(std::memory_order_relaxed);
  stats.epochs_completed = epochs_completed_;
  stats.consumer_wait = consumer_wait_;
  stats.ring = ring_->stats();
  stats.transfer = stage_->stats();
  stats.pinned_bytes = stats.ring.bytes_pinned;
  stats.device_bytes = stats.transfer.device_bytes;
  return stats;
}

void LoaderCore::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  StopProducer();
  stage_->Shutdown();
  if (observer_) {
    observer_->observe(false);  // waits for callbacks in progress
    TsanAcquire(observer_.get());
  }
}

}  // namespace pinwheel::internal
