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
// Stopping (Shutdown, StartEpoch, a kStop error) is checked before every
// sample: a batch left half-read is abandoned and its slot recycled, so a
// stop waits for at most one sample read per worker thread.
// Every call into user code (Read, OpenShard, SampleStream::Next,
// worker_init) is wrapped: what it throws becomes a Status naming where.
// worker_init runs where the dataset is called (before each sample, a
// thread-local check on the fast path), keyed by producer start, thread and
// arena slot: see LoaderOptions::worker_init for the contract.
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
#include "loader/internal/loader_core.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <typeinfo>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "loader/internal/numa.h"
#include "loader/pipeline/memory_admission.h"
#include "pinning/base/mutex.h"
#include "oneapi/tbb/blocked_range.h"
#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/parallel_for.h"
#include "oneapi/tbb/parallel_pipeline.h"
#include "pinning/base/status_macros.h"

namespace pinwheel::internal {

// A batch travelling through the pipeline.
struct ProducedBatch {
  int64_t epoch = 0;
  int64_t index = 0;
  PinnedRing::Slot slot;
  std::vector<int64_t> indices;  // map-style: the sampler's indices
  int shard = -1;                // iterable: the shard it reads from
  // Iterable: the shard's SaveState() after this batch (see Note [exact
  // resume] in loader/loader_checkpoint.h).
  absl::StatusOr<std::string> stream_state;
  int64_t samples = 0;
  absl::Status status;
  // Left half-read because the loader is stopping: never delivered.
  bool abandoned = false;
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

// Returns a number for the calling thread that no other thread of the
// process ever gets (std::thread::id values are reused after a thread ends).
uint64_t ThisThreadToken() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t token =
      next.fetch_add(1, std::memory_order_relaxed);
  return token;
}

// Producer starts, numbered across every loader of the process.
std::atomic<uint64_t> next_run_id{1};

// The run and worker number this thread was last initialised for, to skip
// the lock on the common path.
struct InitCache {
  uint64_t run = 0;
  int number = -1;
};
thread_local InitCache init_cache;

// Returns what an exception thrown by user code `call` says, as a Status.
absl::Status Thrown(absl::string_view call) {
  try {
    throw;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(call, " threw ", e.what()));
  } catch (...) {
    return absl::InternalError(
        absl::StrCat(call, " threw a non-standard exception"));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoaderCore>> LoaderCore::Create(
    const LoaderOptions& options, Device device,
    std::shared_ptr<const Dataset> dataset,
    std::shared_ptr<const IterableDataset> iterable,
    const LoaderCheckpoint* resume) {
  const SampleLayout& sample =
      dataset != nullptr ? dataset->layout() : iterable->layout();
  PINWHEEL_ASSIGN_OR_RETURN(BatchLayout layout,
                            BatchLayout::Create(sample, options.batch_size));
  // Map-style: rank's share of each epoch's order (world_size 1 included:
  // the whole order), from `start` on.
  auto make_order = [&](int64_t start, const DistributedSampler** share)
      -> absl::StatusOr<BatchSampler> {
    PINWHEEL_ASSIGN_OR_RETURN(
        std::unique_ptr<DistributedSampler> order,
        DistributedSampler::Create(dataset->size(), options.rank,
                                   options.world_size, options.shuffle,
                                   options.seed, options.drop_uneven_tail,
                                   start));
    *share = order.get();
    return BatchSampler::Create(std::move(order), options.batch_size,
                                options.drop_last);
  };
  std::optional<BatchSampler> sampler;
  const DistributedSampler* share = nullptr;
  std::optional<BatchSampler> resume_sampler;
  const DistributedSampler* resume_share = nullptr;
  if (dataset != nullptr) {
    PINWHEEL_ASSIGN_OR_RETURN(BatchSampler batches, make_order(0, &share));
    if (batches.batches_per_epoch() == 0) {
      // The producer would run through empty epochs: see Note [at most two
      // epochs ahead]; an epoch that can never hold a batch is a mistake.
      return absl::InvalidArgumentError(absl::StrCat(
          "LoaderBuilder: no epoch can hold a batch: dataset size ",
          dataset->size(), ", rank ", options.rank, " of world_size ",
          options.world_size, " (drop_uneven_tail = ",
          options.drop_uneven_tail ? "true" : "false", "), batch_size = ",
          options.batch_size, ", drop_last = ",
          options.drop_last ? "true" : "false",
          ": an epoch must have at least one batch"));
    }
    sampler.emplace(std::move(batches));
    if (resume != nullptr) {
      PINWHEEL_ASSIGN_OR_RETURN(BatchSampler rest,
                                make_order(resume->position, &resume_share));
      resume_sampler.emplace(std::move(rest));
    }
  }
  const HostMemoryKind memory = device.is_cuda() && options.pin_memory
                                    ? HostMemoryKind::kPageLocked
                                    : HostMemoryKind::kPageable;
  // Host memory admission, before anything is allocated: the ring plus (on
  // the host backend) the buffer pool against RAM and the cgroup limit.
  PINWHEEL_RETURN_IF_ERROR(AdmitHostMemory(
      {.ring_slots = options.prefetch, .slot_bytes = layout.slot_bytes(),
       .batch_size = options.batch_size, .sample_bytes = sample.sample_bytes(),
       .pool_buffers = device.is_cuda() ? 0 : options.device_buffers,
       .pool_buffer_bytes = layout.slot_bytes()}));
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
  core->share_ = share;
  int64_t first_epoch = 0;
  if (resume != nullptr) {
    first_epoch = resume->epoch;
    core->resume_epoch_ = resume->epoch;
    core->resume_sampler_ = std::move(resume_sampler);
    core->resume_share_ = resume_share;
    if (core->iterable_ != nullptr) core->resume_states_ = resume->shard_states;
  }
  core->epoch_ = first_epoch;
  core->StartProducer(first_epoch);
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
  }
}

LoaderCore::~LoaderCore() { Shutdown(); }

int64_t LoaderCore::batches_per_epoch() const {
  return sampler_ ? sampler_->batches_per_epoch() : -1;
}

int LoaderCore::WorkerNumber() const {
  if (inline_) return 0;  // the consumer's thread
  // Inside the arena: its slot, 0..workers-1 (the producer, a master, holds
  // the reserved slot 0). Threads in the arena at once hold distinct slots.
  const int slot = tbb::this_task_arena::current_thread_index();
  const int workers = std::max(1, options_.num_workers);
  return slot >= 0 && slot < workers ? slot : 0;
}

const BatchSampler& LoaderCore::SamplerFor(int64_t epoch) const {
  return epoch == resume_epoch_ && resume_sampler_ ? *resume_sampler_
                                                   : *sampler_;
}

const DistributedSampler& LoaderCore::ShareFor(int64_t epoch) const {
  return epoch == resume_epoch_ && resume_share_ != nullptr ? *resume_share_
                                                            : *share_;
}

absl::Status LoaderCore::InitWorkerIfNeeded() {
  if (!options_.worker_init) return absl::OkStatus();
  const uint64_t run = run_id_.load(std::memory_order_acquire);
  const int number = WorkerNumber();
  if (init_cache.run == run && init_cache.number == number) {
    return absl::OkStatus();
  }
  const uint64_t thread = ThisThreadToken();
  {
    MutexLock lock(&mu_);
    if (!init_error_.ok()) return init_error_;
    auto it = initialized_.find(thread);
    if (it != initialized_.end() && it->second == number) {
      init_cache = {run, number};
      return absl::OkStatus();
    }
  }
  absl::Status status;
  try {
    status = options_.worker_init(number);
  } catch (...) {
    status = Thrown("worker_init");
  }
  if (status.ok()) {
    MutexLock lock(&mu_);
    initialized_[thread] = number;
    init_cache = {run, number};
    return status;
  }
  status = absl::Status(status.code(),
                        absl::StrCat("worker_init failed for worker ", number,
                                     ": ", status.message()));
  MutexLock lock(&mu_);
  if (init_error_.ok()) init_error_ = status;
  return init_error_;
}

absl::Status LoaderCore::ReadOne(int64_t index, SampleView& view) const {
  try {
    return dataset_->Read(index, view);
  } catch (...) {
    return Thrown("Read");
  }
}

void LoaderCore::PrepareView(SampleView& view) const {
  const SampleLayout& sample = layout_.sample();
  for (int f = 0; f < sample.num_fields(); ++f) {
    const FieldSpec& spec = sample.fields()[f];
    if (spec.variable_length) view.set_length(f, spec.shape[0]);
  }
}

absl::Status LoaderCore::FinishView(SampleView& view) const {
  PINWHEEL_RETURN_IF_ERROR(view.status());
  const SampleLayout& sample = layout_.sample();
  for (int f = 0; f < sample.num_fields(); ++f) {
    const FieldSpec& spec = sample.fields()[f];
    if (!spec.variable_length) continue;
    const int64_t length = view.length(f);
    if (length < 0 || length > spec.shape[0]) {
      return absl::OutOfRangeError(absl::StrCat(
          "length ", length, " set for field '", spec.name, "' is outside 0..",
          spec.shape[0]));
    }
    // Zero the padding: the slot holds an older batch's bytes.
    const size_t row = spec.bytes() / static_cast<size_t>(spec.shape[0]);
    absl::Span<std::byte> bytes = view.field(f);
    std::memset(bytes.data() + row * static_cast<size_t>(length), 0,
                bytes.size() - row * static_cast<size_t>(length));
  }
  return absl::OkStatus();
}

// Writes every sample of `batch` into its slot; on failure sets
// batch.status (kStop) or compacts the batch without the failed samples
// (kSkipSample). Stops between samples when the loader is stopping
// (batch.abandoned).
void LoaderCore::Fill(ProducedBatch& batch) {
  if (iterable_ != nullptr) {
    FillFromStream(batch);
    return;
  }
  const int64_t n = static_cast<int64_t>(batch.indices.size());
  batch.samples = n;
  std::vector<absl::Status> failures(static_cast<size_t>(n));
  std::atomic<bool> abandoned{false};
  std::atomic<bool> init_failed{false};
  auto read_range = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      if (stopping()) {
        abandoned.store(true, std::memory_order_relaxed);
        return;
      }
      if (!InitWorkerIfNeeded().ok()) {
        init_failed.store(true, std::memory_order_relaxed);
        return;
      }
      SampleView view(layout_, batch.slot.data, p, batch.indices[p]);
      PrepareView(view);
      absl::Status status = ReadOne(batch.indices[p], view);
      if (!view.status().ok()) {
        status = view.status();  // a misuse of the view is the first fault
      } else if (status.ok()) {
        status = FinishView(view);
      }
      failures[p] = std::move(status);
    }
  };
  const SampleLayout& sample = layout_.sample();
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
  if (init_failed.load(std::memory_order_relaxed)) {
    MutexLock lock(&mu_);
    batch.status = init_error_;
    return;
  }
  if (abandoned.load(std::memory_order_relaxed)) {
    batch.abandoned = true;
    return;
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
  absl::Status init = InitWorkerIfNeeded();
  if (!init.ok()) {
    batch.status = std::move(init);
  } else {
    for (; p < options_.batch_size; ++p) {
      if (stopping()) {
        batch.abandoned = true;
        break;
      }
      SampleView view(layout_, batch.slot.data, p, -1);
      PrepareView(view);
      absl::StatusOr<bool> more;
      try {
        more = shard.stream->Next(view);
      } catch (...) {
        more = Thrown("SampleStream::Next");
      }
      if (!view.status().ok()) {
        more = view.status();
      } else if (more.ok() && *more) {
        absl::Status finished = FinishView(view);
        if (!finished.ok()) more = std::move(finished);
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
  }
  // drop_last: each shard's last batch, when short, is dropped (a batch
  // holds samples of one shard only).
  if (batch.status.ok() && options_.drop_last && p < options_.batch_size) {
    p = 0;
  }
  batch.samples = p;
  batch.indices.assign(static_cast<size_t>(p), -1);
  if (batch.status.ok()) {
    try {
      batch.stream_state = shard.stream->SaveState();
    } catch (...) {
      batch.stream_state = Thrown("SampleStream::SaveState");
    }
  }
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
  } else if (batch.samples == 0 || batch.abandoned) {
    // Every sample skipped or dropped, or left half-read by a stop.
    ring_->Recycle(batch.slot.index, nullptr);
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
  {
    MutexLock lock(&mu_);
    initialized_.clear();  // worker_init runs again on every thread
    init_error_ = absl::OkStatus();
  }
  run_id_.store(next_run_id.fetch_add(1, std::memory_order_relaxed),
                std::memory_order_release);
  {
    MutexLock lock(&epoch_mu_);
    consumer_epoch_ = first_epoch;
    stop_.store(false, std::memory_order_release);
  }
  if (inline_) {
    inline_epoch_ = first_epoch;
    inline_epoch_done_ = false;
    inline_next_ = 0;
    return;
  }
  producer_ = std::thread([this, first_epoch] { ProducerLoop(first_epoch); });
}

void LoaderCore::StopProducer() {
  {
    MutexLock lock(&epoch_mu_);  // wakes AwaitConsumerNear()
    stop_.store(true, std::memory_order_release);
  }
  ring_->Cancel();
  if (producer_.joinable()) producer_.join();
  // The workers' last critical sections on mu_ (InitWorkerIfNeeded) ended
  // before the producer's pipeline returned, through oneTBB's own
  // synchronisation, which ThreadSanitizer does not see (Note [ThreadSanitizer
  // and the system libraries]). Taking mu_ once here shows it that edge
  // before a later StartProducer() or the destructor touches what they did.
  { MutexLock lock(&mu_); }
  inline_epoch_done_ = true;
}

bool LoaderCore::AwaitConsumerNear(int64_t epoch) {
  MutexLock lock(&epoch_mu_);
  auto near = [this, epoch]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(epoch_mu_) {
    return stopping() || consumer_epoch_ >= epoch - 1;
  };
  Await(epoch_mu_, near);
  return !stopping();
}

void LoaderCore::ProducerLoop(int64_t first_epoch) {
  for (int64_t epoch = first_epoch; AwaitConsumerNear(epoch); ++epoch) {
    if (epoch > Loader::kMaxEpoch) {
      FilledBatch failed;
      failed.kind = FilledBatch::Kind::kError;
      failed.epoch = epoch;
      failed.error = absl::OutOfRangeError(
          absl::StrCat("epoch ", epoch, " is past the last one, "
                       "Loader::kMaxEpoch = ", Loader::kMaxEpoch));
      stop_.store(true, std::memory_order_release);
      stage_->Submit(std::move(failed));
      return;
    }
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
  // One batch's indices at a time: the order is computed per position, in
  // O(1) memory whatever the dataset's size.
  const BatchSampler& batches = SamplerFor(epoch);
  const int64_t count = batches.batches_per_epoch();
  int64_t next = 0;
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
              if (stopping() || next >= count) {
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
              batch->index = next;
              batch->slot = *slot;
              batches.Batch(epoch, next++, &batch->indices);
              TsanRelease(&next);
              TsanRelease(batch);
              return batch;
            }) &
            tbb::make_filter<ProducedBatch*, ProducedBatch*>(
                tbb::filter_mode::parallel,
                [&](ProducedBatch* batch) {
                  TsanAcquire(batch);
                  if (!stopping()) Fill(*batch);
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

absl::Status LoaderCore::OpenShards(int64_t epoch) {
  const int per_rank = std::max(1, options_.num_workers);
  const int num_shards = per_rank * options_.world_size;
  PINWHEEL_RETURN_IF_ERROR(InitWorkerIfNeeded());
  for (int i = 0; i < per_rank; ++i) {
    const int shard = options_.rank * per_rank + i;
    absl::StatusOr<std::unique_ptr<SampleStream>> stream;
    try {
      stream = iterable_->OpenShard(shard, num_shards, epoch);
    } catch (...) {
      stream = Thrown("OpenShard");
    }
    if (stream.ok() && *stream == nullptr) {
      stream = absl::InvalidArgumentError(
          "OpenShard returned OK with a null stream");
    }
    if (!stream.ok()) {
      return absl::Status(
          stream.status().code(),
          absl::StrCat("opening shard ", shard, " of ", num_shards,
                       " for epoch ", epoch, ": ", stream.status().message()));
    }
    auto s = std::make_unique<Shard>();
    if (epoch == resume_epoch_ && static_cast<size_t>(i) < resume_states_.size() &&
        resume_states_[i].has_value()) {
      absl::Status restored;
      try {
        restored = (*stream)->RestoreState(*resume_states_[i]);
      } catch (...) {
        restored = Thrown("SampleStream::RestoreState");
      }
      if (!restored.ok()) {
        return absl::Status(
            restored.code(),
            absl::StrCat("restoring shard ", shard, " of ", num_shards,
                         " for epoch ", epoch, " from the checkpoint: ",
                         restored.message()));
      }
    }
    s->stream = *std::move(stream);
    shards_.push_back(std::move(s));
  }
  return absl::OkStatus();
}

void LoaderCore::RunEpochIterable(int64_t epoch) {
  shards_.clear();
  // On the producer thread, in its arena slot: worker_init runs first.
  absl::Status opened;
  TsanRelease(&opened);
  arena_->execute([&] {
    TsanAcquire(&opened);
    opened = OpenShards(epoch);
    TsanRelease(&opened);
  });
  TsanAcquire(&opened);
  if (!opened.ok()) {
    FilledBatch failed;
    failed.kind = FilledBatch::Kind::kError;
    failed.epoch = epoch;
    failed.error = std::move(opened);
    stop_.store(true, std::memory_order_release);
    stage_->Submit(std::move(failed));
    shards_.clear();
    return;
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
                MutexLock lock(&shards_[chosen]->mu);
                shards_[chosen]->busy = false;
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
                  if (!stopping()) {
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
                      MutexLock lock(&states_mu_);
                      stream_states_.push_back(
                          {epoch, batch->index, batch->shard,
                           std::move(batch->stream_state)});
                    }
                    Deliver(*batch);
                  }
                  TsanRelease(&delivered);
                }));
  });
  TsanAcquire(&turn);
  TsanAcquire(&delivered);
  shards_.clear();  // the streams are done with
}

bool LoaderCore::ProduceInline() {
  if (inline_epoch_done_) return false;
  if (inline_next_ >= SamplerFor(inline_epoch_).batches_per_epoch()) {
    FilledBatch end;
    end.kind = FilledBatch::Kind::kEndOfEpoch;
    end.epoch = inline_epoch_;
    stage_->Submit(std::move(end));
    // Prepare the next epoch; it starts when the consumer asks again.
    if (inline_epoch_ >= Loader::kMaxEpoch) {
      inline_epoch_done_ = true;  // Next() reports it (see LoaderCore::Next)
      return true;
    }
    ++inline_epoch_;
    inline_next_ = 0;
    return true;
  }
  absl::StatusOr<PinnedRing::Slot> slot = ring_->Acquire();
  if (!slot.ok()) return false;
  ProducedBatch batch;
  batch.epoch = inline_epoch_;
  batch.index = inline_next_;
  batch.slot = *slot;
  SamplerFor(inline_epoch_).Batch(inline_epoch_, inline_next_++,
                                  &batch.indices);
  Fill(batch);
  Deliver(batch);
  if (stopping()) inline_epoch_done_ = true;
  return true;
}

absl::StatusOr<std::optional<DeviceBatch>> LoaderCore::Next() {
  if (shut_down_) return absl::CancelledError("Next() after Shutdown()");
  if (!restart_failed_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Next(): the loader is stopped: ", restart_failed_.message(),
        "; call StartEpoch() again"));
  }
  if (!failed_.ok()) return failed_;
  if (epoch_ > Loader::kMaxEpoch) {
    failed_ = absl::OutOfRangeError(
        absl::StrCat("epoch ", epoch_, " is past the last one, "
                     "Loader::kMaxEpoch = ", Loader::kMaxEpoch));
    return failed_;
  }
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
    case FilledBatch::Kind::kEndOfEpoch: {
      ++epoch_;
      ++epochs_completed_;
      delivered_in_epoch_ = 0;
      MutexLock lock(&epoch_mu_);  // see Note [at most two epochs ahead]
      consumer_epoch_ = epoch_;
      consumed_in_epoch_ = 0;
      committed_states_.clear();
      return std::optional<DeviceBatch>();
    }
    case FilledBatch::Kind::kError:
      failed_ = delivery->error;
      return failed_;
    case FilledBatch::Kind::kBatch:
      break;
  }
  if (sampler_) {
    consumed_in_epoch_ =
        SamplerFor(delivery->epoch).PositionsIn(delivery->index + 1);
  } else {
    CommitStreamStates(delivery->epoch, delivery->index);
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
  if (epoch < 0 || epoch > Loader::kMaxEpoch) {
    return absl::InvalidArgumentError(
        absl::StrCat("StartEpoch(", epoch, "): epoch must be in 0..",
                     Loader::kMaxEpoch, " (Loader::kMaxEpoch)"));
  }
  if (epoch == epoch_ && delivered_in_epoch_ == 0 && failed_.ok() &&
      restart_failed_.ok()) {
    return absl::OkStatus();
  }
  StopProducer();
  absl::Status discarded = stage_->DiscardPending();
  if (!discarded.ok()) {
    // The producer is stopped and stays so: Next() says why until a
    // StartEpoch() succeeds.
    restart_failed_ = absl::Status(
        discarded.code(), absl::StrCat("StartEpoch(", epoch, ") failed: ",
                                       discarded.message()));
    return restart_failed_;
  }
  ring_->Resume();
  failed_ = absl::OkStatus();
  restart_failed_ = absl::OkStatus();
  epoch_ = epoch;
  delivered_in_epoch_ = 0;
  ClearResumeAndStreamStates();
  StartProducer(epoch);
  return absl::OkStatus();
}

void LoaderCore::CommitStreamStates(int64_t epoch, int64_t index) {
  MutexLock lock(&states_mu_);
  while (!stream_states_.empty()) {
    StreamState& front = stream_states_.front();
    if (front.epoch > epoch || (front.epoch == epoch && front.index > index)) {
      break;
    }
    if (front.epoch == epoch && front.index == index) {
      const auto shard = static_cast<size_t>(front.shard);
      if (committed_states_.size() <= shard) committed_states_.resize(shard + 1);
      committed_states_[shard] = std::move(front.state);
    }
    stream_states_.pop_front();
  }
}

void LoaderCore::ClearResumeAndStreamStates() {
  // StartEpoch() starts whole epochs: the checkpoint's position is spent.
  resume_epoch_ = -1;
  resume_sampler_.reset();
  resume_share_ = nullptr;
  resume_states_.clear();
  consumed_in_epoch_ = 0;
  committed_states_.clear();
  MutexLock lock(&states_mu_);
  stream_states_.clear();
}

absl::StatusOr<LoaderCheckpoint> LoaderCore::Checkpoint() const {
  LoaderCheckpoint c;
  c.shuffle = options_.shuffle;
  c.seed = options_.seed;
  c.batch_size = options_.batch_size;
  c.drop_last = options_.drop_last;
  c.drop_uneven_tail = options_.drop_uneven_tail;
  c.world_size = options_.world_size;
  c.rank = options_.rank;
  c.epoch = epoch_;
  if (dataset_ != nullptr) {
    if (!options_.in_order) {
      return absl::FailedPreconditionError(
          "Checkpoint(): the loader delivers out of order (in_order = false), "
          "so the batches delivered are not a prefix of the epoch's order; "
          "build it with in_order(true) to checkpoint");
    }
    c.kind = LoaderCheckpoint::Kind::kMapStyle;
    c.dataset_size = dataset_->size();
    c.position = ShareFor(epoch_).GlobalPosition(consumed_in_epoch_);
    return c;
  }
  c.kind = LoaderCheckpoint::Kind::kIterable;
  c.dataset_size = -1;
  c.position = delivered_in_epoch_;
  const int per_rank = std::max(1, options_.num_workers);
  c.num_shards = per_rank * options_.world_size;
  c.shard_states.resize(static_cast<size_t>(per_rank));
  for (int i = 0; i < per_rank; ++i) {
    const auto s = static_cast<size_t>(i);
    if (s < committed_states_.size() && committed_states_[s].has_value()) {
      const absl::StatusOr<std::string>& state = *committed_states_[s];
      if (!state.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Checkpoint(): shard ", options_.rank * per_rank + i,
            "'s SampleStream::SaveState() failed: ", state.status().message(),
            absl::IsUnimplemented(state.status())
                ? " (an IterableDataset needs SampleStream::SaveState() and "
                  "RestoreState() to be checkpointed mid-epoch)"
                : ""));
      }
      c.shard_states[s] = *state;
    } else if (epoch_ == resume_epoch_ && s < resume_states_.size()) {
      c.shard_states[s] = resume_states_[s];  // nothing delivered since
    }
  }
  return c;
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
}

}  // namespace pinwheel::internal
