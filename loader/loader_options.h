// LoaderOptions: every knob of a Loader, with its default. LoaderBuilder
// validates them once, in Build().
#ifndef PINWHEEL_LOADER_LOADER_OPTIONS_H_
#define PINWHEEL_LOADER_LOADER_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

#include "loader/index_sampler.h"
#include "transfer/device.h"
#include "transfer/device_transform.h"
#include "transfer/static_device_buffer.h"

namespace pinwheel {

// What the loader does when a dataset Read fails (returns an error or
// throws) for one sample.
enum class ErrorPolicy {
  // The consumer receives the error, naming index, batch and the original
  // message, in place of that batch; the loader then stops (every later
  // Next() returns the same error).
  kStop,
  // The sample is left out of its batch (which is delivered shorter) and
  // counted in LoaderStats::samples_skipped; never silently. A sample the
  // device transform cannot produce (a corrupt JPEG decoded on the GPU) is
  // left out alike, by the device stage.
  kSkipSample,
  // The sample is replaced by another, deterministic one: dataset index
  // R(seed, epoch, failed index, attempt) drawn uniformly (a pure function,
  // so the same with any number of workers and after a resume), tried up to
  // 8 times before the batch fails as under kStop. The batch keeps its
  // shape; its sample_indices() name the replacement; each replacement is
  // counted in LoaderStats::samples_replaced, the last cause kept in
  // LoaderStats::last_replaced. Map-style datasets only. (A sample the
  // device transform cannot produce fails its batch as under kStop: the
  // device stage cannot read another.)
  kReplace,
};

// Whether batches are gathered by the device straight from the dataset's
// registered host memory (loader/gather_source.h) instead of read by
// workers into pinned slots and copied.
enum class GatherMode {
  // The gather path when the dataset supports it (Dataset::Gather) and its
  // memory is admitted and registered; otherwise the worker path, with the
  // reason in LoaderStats::gather_fallback.
  kAuto,
  // The gather path, or Build() fails with FailedPrecondition saying why.
  kOn,
  // The worker path.
  kOff,
};

// Periodic stats (LoaderOptions::stats_report): StatsToJson(stats()) every
// `every` and/or every `every_batches` delivered batches, handed to
// `callback` and/or appended to the file `path` as one line (JSON Lines).
// Off when neither callback nor path is set. A value; thread-compatible.
// See Note [periodic stats] in loader/telemetry/stats_reporter.h.
struct StatsReportOptions {
  // A report every this long (wall clock), > 0; ZeroDuration: time does not
  // trigger reports.
  absl::Duration every = absl::ZeroDuration();
  // A report every this many delivered batches, >= 0; 0: batches do not
  // trigger reports. With a sink, `every` or `every_batches` must be set.
  int64_t every_batches = 0;
  // Called with each report's JSON object (one line, no newline) on the
  // loader's report thread, never on the consumer's nor under a loader
  // lock; one call at a time. An error or an exception stops the reports;
  // Loader::stats_report_status() then returns it.
  std::function<absl::Status(const std::string& json)> callback;
  // A file each report is appended to as one line, written whole by one
  // write(2) (O_APPEND: a reader never sees half a line; several loaders
  // may share the file). Created when missing; Build() fails naming the
  // path when it cannot be opened. Empty: none.
  std::string path;
};

struct LoaderOptions {
  // Batching
  int64_t batch_size = 1;  // samples per batch; >= 1
  // Drop each epoch's last short batch. An IterableDataset's batches are
  // cut from each shard's stream on its own, so there each shard's last
  // batch, when short, is dropped (without drop_last each shard may end in
  // a short batch).
  bool drop_last = false;

  // Order
  bool shuffle = false;  // a new permutation every epoch
  uint64_t seed = 0;     // fixes the permutations (with the epoch)
  int rank = 0;          // this process's rank; 0 <= rank < world_size
  int world_size = 1;    // ranks sharing the dataset; >= 1
  // (An IterableDataset is split into world_size × max(1, num_workers)
  // shards: at most LoaderCheckpoint::kMaxNumShards = 2^31-1.)
  // Distributed only: drop the tail that does not divide evenly among ranks
  // instead of padding by wrapping around (torch's drop_last for its
  // DistributedSampler).
  bool drop_uneven_tail = false;
  // Fixed shapes: a batch that would be short (an epoch's last, or one
  // that lost samples to kSkipSample) is delivered with batch_size samples
  // instead, the missing ones zero-filled, and an extra field `valid_field`
  // (u8 per sample: 1 real, 0 padding) appended to the layout. Padding has
  // sample index -1 and is counted in LoaderStats::samples_padded, not in
  // samples_delivered. DeviceBatch::size() is then always batch_size; its
  // info().padded says how many are padding. A batch that lost every sample
  // is still not delivered.
  bool pad_last_batch = false;
  // The mask's field name under pad_last_batch; it must not be a dataset
  // field's name.
  std::string valid_field = "valid";
  // Deliver batches in sampler order. false: as soon as each is ready.
  bool in_order = true;
  // A caller's own order (map-style datasets; see loader/index_sampler.h):
  // the global order of every epoch is sampler->At(seed, epoch, position),
  // dealt over the ranks like the built-in one. Null: the built-in order
  // (shuffle, seed). Needs shuffle = false (the sampler decides the order;
  // `seed` is still its seed).
  std::shared_ptr<const IndexSampler> sampler;

  // Parameters that affect performance
  // Threads reading samples (a oneTBB arena); 0 reads on the consumer's
  // thread inside Next(); kNumWorkersFromCpus: one fewer than the CPUs this
  // process may use (at least 1), read at Build() from its affinity mask and
  // cgroup quota, shared among the node's ranks when they draw on the same
  // CPUs (loader/cpu_budget.h; LoaderStats::num_workers says the number; an
  // IterableDataset's shards, and so its checkpoints, then depend on it).
  // Range 0..256, or kNumWorkersFromCpus.
  // More workers than those CPUs are honoured but said once at Build()
  // (see warn_cpu_oversubscription).
  static constexpr int kNumWorkersFromCpus = -1;
  // kAuto (num_workers or prefetch, or both): sized at run time to the
  // consumer's step, within the CPU and memory budgets; see "Auto-tuning"
  // below.
  static constexpr int kAuto = -2;
  int num_workers = 0;
  // When num_workers exceeds the CPUs this process may use, Build() writes
  // one line to stderr naming them, what limits them (the launcher's
  // binding, a cgroup quota) and the fix; and one when an IterableDataset
  // has fewer pinned slots (prefetch) than workers, since each of its
  // batches is read by one worker into a slot of its own (unless its
  // streams leave their samples' decode to any worker:
  // IterableDataset::defers_sample_work()). false keeps them to
  // LoaderStats::cpu_warning.
  bool warn_cpu_oversubscription = true;
  // Under Open MPI's default binding of a rank to one core (two ranks or
  // fewer), the loader's threads run on this rank's share of the node
  // instead, said once at Build() (Note [Open MPI's default binding is
  // widened], loader/worker_cpus.h). true keeps them on the binding.
  bool keep_launcher_binding = false;
  // Pinned slots: batches being read or copied at once (the prefetch depth).
  // Memory: prefetch × slot bytes of page-locked host memory. Range 1..1024,
  // or kAuto.
  int prefetch = 4;

  // Auto-tuning (num_workers and/or prefetch = kAuto; loader/README.md,
  // "Auto-tuning"). Build() starts the most worker threads it may use and
  // makes a ring of the most slots, allocating a slot only when the depth
  // first reaches it; while batches are delivered a controller on the
  // consumer's thread lets `workers` of those threads read and `prefetch`
  // slots fill, growing them while the consumer waits in Next() and
  // shrinking them after a longer run without wait, at most one change per
  // 16 batches, each logged and counted in LoaderStats::auto_tune. Order,
  // exactly-once delivery and checkpoints do not depend on it. An
  // IterableDataset is split into shards for the most workers (as with
  // that many num_workers; its checkpoints need the same on resume). The
  // gather path has no workers: kAuto tunes nothing there (said in
  // LoaderStats::auto_tune.off_reason).
  // The most workers kAuto may use: 0 = one fewer than the CPUs this
  // process may use (as kNumWorkersFromCpus); else 1..256 (more than those
  // CPUs is said as for num_workers: reads that wait on storage may want it).
  int auto_max_workers = 0;
  // The most pinned bytes prefetch = kAuto may allocate: 0 = up to 64 slots
  // as the host memory admits; else at least one slot's bytes.
  size_t auto_max_pinned_bytes = 0;
  // Each change written as one line to stderr ("pinwheel: auto-tune: ...");
  // false keeps it to LoaderStats::auto_tune.last_reason.
  bool auto_tune_log = true;
  // Device buffers: batches copied ahead of, or held by, the consumer.
  // Memory: device_buffers × slot bytes on the device. Range 1..64.
  // Small batches (well under 1 MB) want many of both in flight: on an H100
  // 0.5 MB batches ran fastest with prefetch 64 and 8 device buffers (README,
  // Performance; `pinwheel_bench --quick` measures it on your machine).
  int device_buffers = 2;
  // Page-locked slots on the cuda backend (false: pageable, for comparison;
  // copies are then synchronous in effect). Ignored on the host backend.
  bool pin_memory = true;
  // The device batches go to; nullopt: the first GPU if any, else the host.
  std::optional<Device> device;

  // Faults
  ErrorPolicy on_error = ErrorPolicy::kStop;
  // Longest Next() waits for one batch before DeadlineExceeded naming it;
  // InfiniteDuration waits forever. > 0. Needs num_workers >= 1: a read on
  // the consumer's own thread cannot be timed out.
  absl::Duration timeout = absl::InfiniteDuration();
  // Called on a thread before it first calls into the dataset (Read,
  // OpenShard, SampleStream::Next) for this loader, with the thread's worker
  // number. The contract:
  //  - numbers are in 0..max(num_workers, 1)-1: a worker's slot in the
  //    loader's thread arena. Threads reading at the same time have distinct
  //    numbers; the same numbers come back after every restart.
  //  - once per thread and number per producer start (Build(), or a
  //    StartEpoch() that restarts the pipeline). oneTBB shares its threads
  //    between arenas, so a thread may leave and come back under another
  //    number: it is then called again, with the new number, before it reads.
  //  - num_workers = 0 with a map-style dataset: samples are read on the
  //    consumer's thread inside Next(), and worker_init(0) is called there
  //    before the first Read (again for another consumer thread).
  //    IterableDataset: OpenShard runs on the loader's producer thread,
  //    worker 0, after worker_init(0) there.
  //  - an error (or an exception) stops the loader: Next() returns it,
  //    naming the worker number. StartEpoch() clears it; every thread, the
  //    failed one included, is initialised again before it reads.
  // Called from several threads at once: it must be thread-safe.
  std::function<absl::Status(int worker)> worker_init;

  // The device stage (transfer/device_transform.h): a per-batch transform
  // run on the transfer stream after each batch's copy, whose output fields
  // the consumer receives. null: none. Memory: each device buffer also
  // holds the transform's output. Build() returns InvalidArgument naming
  // the transform when it refuses the dataset's layout.
  std::shared_ptr<const DeviceTransform> device_transform;

  // Longest Shutdown() (and ~Loader) waits for the workers to stop. A stop
  // waits for the reads running (one per worker); a read that never returns
  // (hung storage, a deadlocked lock in Read) is abandoned after this long:
  // Shutdown() returns and Loader::shutdown_status() names each such read
  // (index, batch, epoch, worker), and what those threads touch (the dataset,
  // the pinned slot, the ring) stays alive until they return. InfiniteDuration
  // waits forever. > 0. (num_workers = 0 reads on the consumer's own thread:
  // nothing to wait for.)
  absl::Duration shutdown_timeout = absl::Seconds(10);

  // The gather path (see GatherMode): for InMemoryDataset, RecordFileDataset
  // and TokenWindowDataset (and any dataset implementing Gather()), the
  // batch is written into the device buffer straight from the dataset's
  // memory, registered once (cudaHostRegister; a file is first read into
  // memory the loader owns) and shared with other loaders of the process
  // over the same memory. No worker reads samples. With the loader's own
  // order (no custom sampler) and keys it can compute (rows, token
  // windows), nothing but kernel arguments goes to the device: the kernel
  // computes each sample's index and key from (seed, epoch, position)
  // (Note [the order on the device], loader/gather/gather_plan.h) and
  // Next() issues the batches on the consumer's thread, num_workers
  // ignored; otherwise one thread (num_workers = 0: the consumer's)
  // computes the keys and uploads 8 bytes a sample. Either way the batches
  // are the worker path's, byte for byte. Rows of 32 KiB and more go by the
  // copy engines (no SM time taken from a compute step); smaller rows and
  // token windows by a kernel reading the registered memory. Memory: the
  // registered bytes (a file's size) are admitted against the host memory
  // budget. It cannot feed a device_transform, nor variable-length fields,
  // nor pad_last_batch (it does not pad short batches): with any of them
  // kAuto falls back to the worker path and kOn fails Build().
  // Arrays under 32 MiB are gathered from a copy the loader takes when it
  // is built (registering their heap pages in place would pin their
  // neighbours too: Note [small arrays are copied onto pages of their own],
  // gather_memory.h). Its read-ahead is the device buffers: beside a compute
  // step give it 4 or more (on the H100, 2026-11-24, W3 ran +7 % with 2 and
  // -1.6 % with 4). Measured there (pinwheel_bench, medians of 5): W1 0.99
  // of the raw copy on 1 core (the worker path 0.90 on 14), W2 1.05 with
  // 12.6 us of CPU a batch (the worker path 0.61 with 313 us). Off by
  // default: Build() would otherwise read a whole file into memory and pin
  // it, a cost a loader should not take unasked; kAuto uses it where it
  // can, kOn insists.
  GatherMode gather = GatherMode::kOff;

  // Fixed addresses (a captured CUDA graph reads fixed addresses): device
  // buffers the caller owns (see transfer/static_device_buffer.h), into
  // which every batch lands instead of buffers the loader allocates; empty:
  // the loader allocates device_buffers of its own. Each batch says which
  // one holds it (DeviceBatch::buffer_index()); a buffer is reused only
  // after the consumer released the batch in it and its stream passed the
  // release (Note [release fences reuse] in transfer/device_batch.h), so a
  // step per buffer (or one graph over a fixed buffer after a copy) reads a
  // batch that stays put until released. Rules, each checked by Build()
  // (InvalidArgument naming the buffer): 2..64 buffers (one the consumer
  // reads while the next batch lands in another); device_buffers equal to
  // their count (LoaderBuilder::static_device_buffers() sets it); each
  // non-null, 256-byte aligned, device memory of `device` (cuda backend;
  // the host backend takes host memory), not overlapping another, and at
  // least LoaderBuilder::device_buffer_bytes() bytes (the batch layout's
  // slot bytes; with a device_transform the copied batch and, after it,
  // the transform's output); one loader at a time per buffer (another
  // whose loader, or a batch of it, is alive: FailedPrecondition). The
  // gather path is not used with them.
  // Memory: none allocated on the device for batches.
  std::vector<StaticDeviceBuffer> static_device_buffers;

  // Telemetry
  // Stats exported per interval (see StatsReportOptions); off by default.
  StatsReportOptions stats_report;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_LOADER_OPTIONS_H_
