// LoaderBuilder: the one way to make a Loader. Setters chain; Build()
// validates every option once and returns InvalidArgument naming the
// option, the value and the rule, or the allocation error with its sizes.
//
// Example:
//   absl::StatusOr<Loader> loader =
//       LoaderBuilder(dataset).batch_size(256).shuffle(/*seed=*/7)
//           .num_workers(8).prefetch(4).drop_last(true)
//           .device(Device::FirstGpuOrHost()).Build();
#ifndef PINWHEEL_LOADER_LOADER_BUILDER_H_
#define PINWHEEL_LOADER_LOADER_BUILDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "loader/dataset.h"
#include "loader/index_sampler.h"
#include "loader/iterable_dataset.h"
#include "loader/launch_environment.h"
#include "loader/loader.h"
#include "loader/loader_checkpoint.h"
#include "loader/loader_options.h"
#include "transfer/device.h"
#include "transfer/static_device_buffer.h"

namespace pinwheel {

// Thread-compatible.
class LoaderBuilder {
 public:
  // The loader shares ownership of the dataset.
  explicit LoaderBuilder(std::shared_ptr<const Dataset> dataset);
  explicit LoaderBuilder(std::shared_ptr<const IterableDataset> dataset);

  LoaderBuilder& batch_size(int64_t n) {
    options_.batch_size = n;
    return *this;
  }
  LoaderBuilder& drop_last(bool on = true) {
    options_.drop_last = on;
    return *this;
  }
  // Reshuffles every epoch from `seed`.
  LoaderBuilder& shuffle(uint64_t seed) {
    options_.shuffle = true;
    options_.seed = seed;
    return *this;
  }
  LoaderBuilder& distributed(int rank, int world_size) {
    options_.rank = rank;
    options_.world_size = world_size;
    return *this;
  }
  // Rank and world size from `env`, and, unless device() was set before,
  // env.LocalDevice() (cuda:local_rank; see loader/launch_environment.h). A
  // device error is returned by Build().
  LoaderBuilder& distributed(const LaunchEnvironment& env);
  // The same from the job launcher's variables (torchrun, Open MPI, MPICH,
  // Slurm), read now; a bad or conflicting variable is returned by Build().
  LoaderBuilder& distributed_from_launcher();
  // Reads in `s`'s order (see loader/index_sampler.h) drawn with `seed`,
  // instead of the built-in sequential or shuffled one.
  LoaderBuilder& sampler(std::shared_ptr<const IndexSampler> s,
                         uint64_t seed = 0) {
    options_.sampler = std::move(s);
    options_.seed = seed;
    return *this;
  }
  // Every batch batch_size samples, short ones padded, with a u8 validity
  // field `valid_field` (see LoaderOptions::pad_last_batch).
  LoaderBuilder& pad_last_batch(bool on = true,
                                std::string valid_field = "valid") {
    options_.pad_last_batch = on;
    options_.valid_field = std::move(valid_field);
    return *this;
  }
  LoaderBuilder& in_order(bool on) {
    options_.in_order = on;
    return *this;
  }
  // n or LoaderOptions::kNumWorkersFromCpus or LoaderOptions::kAuto.
  LoaderBuilder& num_workers(int n) {
    options_.num_workers = n;
    return *this;
  }
  // The bounds and the log of kAuto (see LoaderOptions, "Auto-tuning"):
  // max_workers 0 = from the CPUs, max_pinned_bytes 0 = up to 64 slots.
  LoaderBuilder& auto_tune(int max_workers, size_t max_pinned_bytes = 0,
                           bool log = true) {
    options_.auto_max_workers = max_workers;
    options_.auto_max_pinned_bytes = max_pinned_bytes;
    options_.auto_tune_log = log;
    return *this;
  }
  // Whether Build() writes its line on too many workers for the CPUs to
  // stderr (see LoaderOptions::warn_cpu_oversubscription).
  LoaderBuilder& warn_cpu_oversubscription(bool on) {
    options_.warn_cpu_oversubscription = on;
    return *this;
  }
  // Whether the loader's threads keep a launcher's one-core binding (see
  // LoaderOptions::keep_launcher_binding).
  LoaderBuilder& keep_launcher_binding(bool keep) {
    options_.keep_launcher_binding = keep;
    return *this;
  }
  // slots or LoaderOptions::kAuto.
  LoaderBuilder& prefetch(int slots) {
    options_.prefetch = slots;
    return *this;
  }
  LoaderBuilder& device_buffers(int n) {
    options_.device_buffers = n;
    return *this;
  }
  LoaderBuilder& pin_memory(bool on) {
    options_.pin_memory = on;
    return *this;
  }
  LoaderBuilder& device(const Device& d) {
    options_.device = d;
    return *this;
  }
  LoaderBuilder& on_error(ErrorPolicy policy) {
    options_.on_error = policy;
    return *this;
  }
  LoaderBuilder& timeout(absl::Duration t) {
    options_.timeout = t;
    return *this;
  }
  LoaderBuilder& shutdown_timeout(absl::Duration t) {
    options_.shutdown_timeout = t;
    return *this;
  }
  LoaderBuilder& worker_init(std::function<absl::Status(int)> fn) {
    options_.worker_init = std::move(fn);
    return *this;
  }
  // Runs `transform` on each batch on the device, after its copy (see
  // transfer/device_transform.h); the batches then show its output fields.
  LoaderBuilder& device_transform(
      std::shared_ptr<const DeviceTransform> transform) {
    options_.device_transform = std::move(transform);
    return *this;
  }
  // Gathers batches from the dataset's registered memory (see
  // LoaderOptions::gather).
  LoaderBuilder& gather(GatherMode mode) {
    options_.gather = mode;
    return *this;
  }
  // Exports StatsToJson(stats()) per interval to a callback and/or a JSON
  // Lines file (see StatsReportOptions), e.g.
  //   .stats_report({.every = absl::Seconds(10), .path = "stats.jsonl"})
  LoaderBuilder& stats_report(StatsReportOptions report) {
    options_.stats_report = std::move(report);
    return *this;
  }
  // Delivers every batch into one of `buffers`, which the caller owns, and
  // sets device_buffers to their count (see
  // LoaderOptions::static_device_buffers for the rules).
  LoaderBuilder& static_device_buffers(
      std::vector<StaticDeviceBuffer> buffers) {
    options_.device_buffers = static_cast<int>(buffers.size());
    options_.static_device_buffers = std::move(buffers);
    return *this;
  }
  // Returns the bytes of each device buffer a loader with these options
  // uses on the worker path: what each static device buffer must hold at
  // least (the batch layout's slot bytes, the pad_last_batch mask included;
  // with a device_transform the copied batch and, after it, the transform's
  // output). InvalidArgument as Build() would return it when batch_size,
  // pad_last_batch's mask or the device transform is refused.
  [[nodiscard]] absl::StatusOr<size_t> device_buffer_bytes() const;
  // Continues from `checkpoint` (Loader::Checkpoint()): the first epoch is
  // the checkpoint's, from its next undelivered sample, dealt over this
  // loader's ranks (see Note [exact resume] in loader/loader_checkpoint.h).
  // Build() returns InvalidArgument naming the field when the checkpoint
  // does not fit the dataset or the options (dataset size, shuffle, seed;
  // for an IterableDataset also world size, rank and shard count).
  LoaderBuilder& resume(LoaderCheckpoint checkpoint) {
    resume_ = std::move(checkpoint);
    return *this;
  }
  // Replaces every option at once.
  LoaderBuilder& options(const LoaderOptions& o) {
    options_ = o;
    return *this;
  }
  const LoaderOptions& options() const { return options_; }

  // Returns the running loader (workers started, memory allocated), or the
  // first invalid option / failed allocation.
  [[nodiscard]] absl::StatusOr<Loader> Build() const;

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<const IterableDataset> iterable_;
  LoaderOptions options_;
  std::optional<LoaderCheckpoint> resume_;
  absl::Status launch_error_;  // from distributed(env) / _from_launcher()
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_LOADER_BUILDER_H_
