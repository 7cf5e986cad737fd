#include "loader/loader_builder.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/cpu_budget.h"
#include "loader/gather/gather_plan.h"
#include "loader/internal/arena_cpus.h"
#include "loader/launch_environment.h"
#include "loader/loader_checkpoint.h"
#include "loader/numa_placement.h"
#include "loader/pipeline/auto_tuner.h"
#include "loader/pipeline/loader_core.h"
#include "loader/telemetry/stats_reporter.h"
#include "loader/worker_cpus.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

template <typename T>
absl::Status BadOption(const char* option, const T& value,
                       absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(
      "LoaderBuilder: option '", option, "' = ", value, ": ", rule));
}

absl::Status Validate(const LoaderOptions& o) {
  if (o.batch_size < 1)
    return BadOption("batch_size", o.batch_size, "must be >= 1");
  if ((o.num_workers < 0 || o.num_workers > 256) &&
      o.num_workers != LoaderOptions::kNumWorkersFromCpus &&
      o.num_workers != LoaderOptions::kAuto) {
    return BadOption(
        "num_workers", o.num_workers,
        "must be in 0..256, or kNumWorkersFromCpus (-1), or kAuto (-2)");
  }
  if ((o.prefetch < 1 || o.prefetch > 1024) &&
      o.prefetch != LoaderOptions::kAuto) {
    return BadOption("prefetch", o.prefetch,
                     "must be in 1..1024, or kAuto (-2)");
  }
  if (o.auto_max_workers < 0 || o.auto_max_workers > 256) {
    return BadOption("auto_max_workers", o.auto_max_workers,
                     "must be in 0..256 (0: from the CPUs this process may "
                     "use)");
  }
  if (!o.static_device_buffers.empty()) {
    const size_t n = o.static_device_buffers.size();
    if (n < 2 || n > 64) {
      return BadOption("static_device_buffers", absl::StrCat(n, " buffers"),
                       "must be 2..64 (one the consumer reads while the next "
                       "batch lands in another)");
    }
    if (static_cast<size_t>(o.device_buffers) != n) {
      return BadOption(
          "device_buffers", o.device_buffers,
          absl::StrCat("must equal the number of static_device_buffers (", n,
                       "); LoaderBuilder::static_device_buffers() sets it"));
    }
  }
  if (o.device_buffers < 1 || o.device_buffers > 64) {
    return BadOption("device_buffers", o.device_buffers, "must be in 1..64");
  }
  if (o.world_size < 1)
    return BadOption("world_size", o.world_size, "must be >= 1");
  if (o.rank < 0 || o.rank >= o.world_size) {
    return BadOption(
        "rank", o.rank,
        absl::StrCat("must be in 0..world_size-1 = 0..", o.world_size - 1));
  }
  if (o.timeout <= absl::ZeroDuration()) {
    return BadOption("timeout", absl::FormatDuration(o.timeout),
                     "must be > 0 (InfiniteDuration() to wait forever)");
  }
  if (o.timeout != absl::InfiniteDuration() && o.num_workers == 0) {
    return BadOption("timeout", absl::FormatDuration(o.timeout),
                     "needs num_workers >= 1: with num_workers = 0 samples "
                     "are read on the consumer's thread, which cannot be "
                     "timed out");
  }
  if (o.shutdown_timeout <= absl::ZeroDuration()) {
    return BadOption("shutdown_timeout",
                     absl::FormatDuration(o.shutdown_timeout),
                     "must be > 0 (InfiniteDuration() to wait forever)");
  }
  if (o.gather != GatherMode::kAuto && o.gather != GatherMode::kOn &&
      o.gather != GatherMode::kOff) {
    return BadOption("gather", static_cast<int>(o.gather),
                     "must be GatherMode::kAuto, kOn or kOff");
  }
  return absl::OkStatus();
}

// A custom sampler's sizes (see loader/index_sampler.h). The sampler's own
// calls may throw: each is caught and named.
absl::Status CheckSampler(const IndexSampler& sampler,
                          const LoaderOptions& options, int64_t dataset_size) {
  if (options.shuffle) {
    return BadOption("shuffle", "true",
                     "a custom sampler decides the order: drop shuffle() and "
                     "pass the seed to sampler(s, seed)");
  }
  int64_t size = 0;
  int64_t made_for = -1;
  int sources = 0;
  try {
    size = sampler.size();
    made_for = sampler.dataset_size();
    sources = sampler.num_sources();
  } catch (...) {
    return absl::InvalidArgumentError(
        "LoaderBuilder: the sampler's size(), dataset_size() or "
        "num_sources() threw");
  }
  if (sources < 0 || sources > IndexSampler::kMaxSources) {
    return BadOption("sampler", absl::StrCat("num_sources() = ", sources),
                     absl::StrCat("must be in 0..", IndexSampler::kMaxSources,
                                  " (LoaderStats keeps a count per source)"));
  }
  if (size < 0) {
    return BadOption("sampler", absl::StrCat("size() = ", size),
                     "must be >= 0");
  }
  if (made_for != -1 && made_for != dataset_size) {
    return BadOption(
        "sampler", absl::StrCat("dataset_size() = ", made_for),
        absl::StrCat("the sampler was made for ", made_for,
                     " indices but the dataset has ", dataset_size));
  }
  return absl::OkStatus();
}

// Note [one worker a streamed batch]
// An IterableDataset's batch is read by one worker, from its shard's stream,
// start to end, into a pinned slot of its own (a stream cannot be split
// among threads, unlike a map-style batch whose samples the workers share:
// Note in batch_filler.cc). So with fewer slots than workers only `prefetch`
// workers read at once: on 2 x H200 (32 cores), TarShards with decode =
// "cpu", 14 workers and the default prefetch 4 kept 3.4 cores busy. A
// dataset whose streams defer their samples' costly part (Note [a streamed
// sample finished elsewhere] in loader/iterable_dataset.h: TarShards does
// when it decodes) keeps the other workers busy with it, and is not told.
// Returns the line that says so, or "" when every worker can read.
std::string SlotBoundWorkers(bool one_worker_a_batch, int workers,
                             int prefetch) {
  if (!one_worker_a_batch || prefetch == LoaderOptions::kAuto ||
      prefetch >= workers) {
    return "";
  }
  return absl::StrCat(
      "pinwheel: num_workers = ", workers,
      " cannot all read at once: an IterableDataset's batch is read by one "
      "worker into a pinned slot of its own, and prefetch = ",
      prefetch, " gives ", prefetch, " slots, so at most ", prefetch,
      " workers read at a time. Fix: prefetch(", workers,
      ") or more (Python prefetch=", workers,
      "), or prefetch = kAuto (\"auto\"). "
      "(LoaderOptions::warn_cpu_oversubscription = false silences this "
      "line.)");
}

}  // namespace

LoaderBuilder::LoaderBuilder(std::shared_ptr<const Dataset> dataset)
    : dataset_(std::move(dataset)) {}
LoaderBuilder::LoaderBuilder(std::shared_ptr<const IterableDataset> dataset)
    : iterable_(std::move(dataset)) {}

LoaderBuilder& LoaderBuilder::distributed(const LaunchEnvironment& env) {
  options_.rank = env.rank;
  options_.world_size = env.world_size;
  if (!options_.device) {
    absl::StatusOr<Device> device = env.LocalDevice();
    if (device.ok()) {
      options_.device = *device;
    } else {
      launch_error_ = device.status();
    }
  }
  return *this;
}

LoaderBuilder& LoaderBuilder::distributed_from_launcher() {
  absl::StatusOr<LaunchEnvironment> env = LaunchEnvironment::FromProcess();
  if (!env.ok()) {
    launch_error_ = env.status();
    return *this;
  }
  return distributed(*env);
}

absl::StatusOr<size_t> LoaderBuilder::device_buffer_bytes() const {
  if (dataset_ == nullptr && iterable_ == nullptr) {
    return absl::InvalidArgumentError("LoaderBuilder: the dataset is null");
  }
  if (options_.batch_size < 1) {
    return BadOption("batch_size", options_.batch_size, "must be >= 1");
  }
  return internal::LoaderCore::DeviceBufferBytes(
      options_, dataset_ != nullptr ? dataset_->layout() : iterable_->layout());
}

absl::StatusOr<Loader> LoaderBuilder::Build() const {
  if (!launch_error_.ok()) {
    return absl::Status(
        launch_error_.code(),
        absl::StrCat("LoaderBuilder: distributed: ", launch_error_.message()));
  }
  if (dataset_ == nullptr && iterable_ == nullptr) {
    return absl::InvalidArgumentError("LoaderBuilder: the dataset is null");
  }
  PINWHEEL_RETURN_IF_ERROR(Validate(options_));
  // Note [a loader sizes itself to its CPUs] (loader/cpu_budget.h). The
  // launcher says how many ranks share this node; a bad launch variable was
  // already reported by distributed_from_launcher(), or is not this
  // loader's concern (rank and world size come from options).
  const absl::StatusOr<LaunchEnvironment> env =
      LaunchEnvironment::FromProcess();
  const LaunchEnvironment launch = env.ok() ? *env : LaunchEnvironment();
  CpuBudget cpu_budget =
      ShareAmongRanks(ReadCpuBudget(), launch.local_world_size);
  LoaderOptions options = options_;
  const Device device = options.device.value_or(Device::FirstGpuOrHost());
  // Note [Open MPI's default binding is widened] (loader/worker_cpus.h): not
  // where the workers are bound to a NUMA node, and only onto CPUs a thread
  // of this process is let onto now.
  // The CPUs the loader's threads are moved onto; empty: none.
  std::vector<int> worker_cpus;
  if (!options.keep_launcher_binding) {
    CpuBudget widened = WidenDefaultBinding(cpu_budget, launch);
    std::vector<int> share =
        ParseCpuList(widened.worker_cpu_list).value_or(std::vector<int>{});
    if (!share.empty() && NumaPlacementFor(device).node < 0 &&
        internal::ThreadCanRunOn(share)) {
      cpu_budget = std::move(widened);
      worker_cpus = std::move(share);
    }
  }
  if (options.num_workers == LoaderOptions::kNumWorkersFromCpus) {
    options.num_workers = WorkersFromCpus(cpu_budget);
  }
  // kAuto: the threads and slots made are the most the tuner may use.
  internal::AutoTunePlan auto_tune{
      .workers = options.num_workers == LoaderOptions::kAuto,
      .prefetch = options.prefetch == LoaderOptions::kAuto,
      .log = options.auto_tune_log};
  if (auto_tune.workers) {
    options.num_workers = options.auto_max_workers > 0
                              ? options.auto_max_workers
                              : WorkersFromCpus(cpu_budget);
  }
  if (dataset_ != nullptr) {
    int64_t size = 0;
    try {
      size = dataset_->size();
    } catch (...) {
      return absl::InvalidArgumentError(
          "LoaderBuilder: the dataset's size() threw");
    }
    if (size < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LoaderBuilder: the dataset's size() = ", size, ": must be >= 0"));
    }
    if (options.sampler != nullptr) {
      PINWHEEL_RETURN_IF_ERROR(CheckSampler(*options.sampler, options, size));
    }
  }
  if (options.on_error == ErrorPolicy::kReplace && iterable_ != nullptr) {
    return BadOption("on_error", "kReplace",
                     "an IterableDataset has no indices to draw a "
                     "replacement from (map-style datasets only)");
  }
  if (options.sampler != nullptr && iterable_ != nullptr) {
    return BadOption("sampler", "set",
                     "an IterableDataset decides its own order");
  }
  if (iterable_ != nullptr) {
    if (options.shuffle) {
      return BadOption("shuffle", "true",
                       "an IterableDataset decides its own order; shuffle it "
                       "inside OpenShard()");
    }
    if (!options.in_order) {
      return BadOption("in_order", "false",
                       "an IterableDataset is delivered in shard round-robin "
                       "order");
    }
    // Each rank opens max(1, num_workers) shards of world_size × that; the
    // count must fit the checkpoint (and OpenShard()'s int).
    const int64_t num_shards =
        int64_t{options.world_size} * std::max(1, options.num_workers);
    if (num_shards > LoaderCheckpoint::kMaxNumShards) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LoaderBuilder: an IterableDataset is split into world_size ",
          options.world_size, " × max(1, num_workers = ", options.num_workers,
          ") = ", num_shards, " shards, more than a checkpoint holds (at most ",
          LoaderCheckpoint::kMaxNumShards,
          "): use fewer workers or a smaller world_size"));
    }
  }
  if (device.is_cuda()) {
    // Re-check: the Device may come from another process's view of the
    // machine (CUDA_VISIBLE_DEVICES).
    absl::StatusOr<Device> checked = Device::Cuda(device.ordinal());
    if (!checked.ok()) {
      return absl::Status(checked.status().code(),
                          absl::StrCat("LoaderBuilder: option 'device': ",
                                       checked.status().message()));
    }
  }
  if (resume_) {
    // A custom order's checkpoint counts the sampler's positions.
    const int64_t order_size = dataset_ == nullptr ? -1
                               : options.sampler != nullptr
                                   ? options.sampler->size()
                                   : dataset_->size();
    PINWHEEL_RETURN_IF_ERROR(CheckResumable(*resume_, options, order_size));
  }
  // The path (the gather's or the workers'), then the loader over it.
  const LoaderCheckpoint* resume = resume_ ? &*resume_ : nullptr;
  PINWHEEL_ASSIGN_OR_RETURN(
      SampleLayout sample,
      internal::LoaderCore::DeliveredSampleLayout(
          options,
          dataset_ != nullptr ? dataset_->layout() : iterable_->layout()));
  PINWHEEL_ASSIGN_OR_RETURN(BatchLayout layout,
                            BatchLayout::Create(sample, options.batch_size));
  if (auto_tune.prefetch) {
    PINWHEEL_ASSIGN_OR_RETURN(options.prefetch,
                              internal::AutoMaxPrefetch(options, layout));
  }
  auto_tune.max_workers = std::max(1, options.num_workers);
  auto_tune.max_prefetch = options.prefetch;
  PINWHEEL_ASSIGN_OR_RETURN(
      internal::LoaderPath path,
      internal::PlanLoaderPath(options, device, layout, dataset_, iterable_,
                               resume));
  // The workers the path starts: the gather path runs at most one (none
  // with the order on the device).
  const int workers = path.workers;
  if (path.gather.used && (auto_tune.workers || auto_tune.prefetch)) {
    auto_tune.off_reason =
        "the gather path has no workers or pinned batches to tune: "
        "num_workers/prefetch = kAuto change nothing there";
    auto_tune.workers = auto_tune.prefetch = false;
  }
  path.auto_tune = std::move(auto_tune);
  path.worker_cpus = std::move(worker_cpus);
  PINWHEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<internal::LoaderCore> core,
      internal::LoaderCore::Create(options, device, std::move(layout),
                                   std::move(path), resume));
  Loader loader(std::move(core));
  loader.num_workers_ = workers;
  loader.cpu_budget_ = cpu_budget;
  loader.cpu_warning_ = WidenedBindingLine(cpu_budget, launch);
  const std::string oversubscribed =
      CpuOversubscription(cpu_budget, loader.num_workers_, launch);
  if (!oversubscribed.empty()) {
    absl::StrAppend(&loader.cpu_warning_,
                    loader.cpu_warning_.empty() ? "" : "\n", oversubscribed);
  }
  const std::string slots_line =
      SlotBoundWorkers(iterable_ != nullptr && !iterable_->defers_sample_work(),
                       workers, options.prefetch);
  if (!slots_line.empty()) {
    absl::StrAppend(&loader.cpu_warning_,
                    loader.cpu_warning_.empty() ? "" : "\n", slots_line);
  }
  if (!loader.cpu_warning_.empty() && options.warn_cpu_oversubscription) {
    std::fprintf(stderr, "%s\n", loader.cpu_warning_.c_str());
  }
  // Note [periodic stats] (loader/telemetry/stats_reporter.h). The report
  // thread reads the core (it outlives the reporter: Loader stops it
  // first) and copies of what Loader::stats() adds.
  PINWHEEL_ASSIGN_OR_RETURN(
      loader.reporter_,
      internal::StatsReporter::Start(
          options.stats_report,
          [core = loader.core_.get(), budget = cpu_budget, workers,
           warning = loader.cpu_warning_](LoaderStats* stats) {
            core->AddSharedStats(stats);
            stats->cpu_budget = budget;
            stats->num_workers = workers;
            stats->cpu_warning = warning;
          }));
  return loader;
}

}  // namespace pinwheel
