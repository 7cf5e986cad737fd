#include "loader/loader_builder.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/loader_checkpoint.h"
#include "loader/pipeline/loader_core.h"
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
  if (o.num_workers < 0 || o.num_workers > 256) {
    return BadOption("num_workers", o.num_workers, "must be in 0..256");
  }
  if (o.prefetch < 1 || o.prefetch > 1024) {
    return BadOption("prefetch", o.prefetch, "must be in 1..1024");
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
  if (o.gather != GatherMode::kAuto && o.gather != GatherMode::kOn &&
      o.gather != GatherMode::kOff) {
    return BadOption("gather", static_cast<int>(o.gather),
                     "must be GatherMode::kAuto, kOn or kOff");
  }
  return absl::OkStatus();
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
  }
  if (iterable_ != nullptr) {
    if (options_.shuffle) {
      return BadOption("shuffle", "true",
                       "an IterableDataset decides its own order; shuffle it "
                       "inside OpenShard()");
    }
    if (!options_.in_order) {
      return BadOption("in_order", "false",
                       "an IterableDataset is delivered in shard round-robin "
                       "order");
    }
    // Each rank opens max(1, num_workers) shards of world_size × that; the
    // count must fit the checkpoint (and OpenShard()'s int).
    const int64_t num_shards =
        int64_t{options_.world_size} * std::max(1, options_.num_workers);
    if (num_shards > LoaderCheckpoint::kMaxNumShards) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LoaderBuilder: an IterableDataset is split into world_size ",
          options_.world_size, " × max(1, num_workers = ", options_.num_workers,
          ") = ", num_shards, " shards, more than a checkpoint holds (at most ",
          LoaderCheckpoint::kMaxNumShards,
          "): use fewer workers or a smaller world_size"));
    }
  }
  Device device = options_.device.value_or(Device::FirstGpuOrHost());
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
    PINWHEEL_RETURN_IF_ERROR(CheckResumable(
        *resume_, options_, dataset_ != nullptr ? dataset_->size() : -1));
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<internal::LoaderCore> core,
      internal::LoaderCore::Create(options_, device, dataset_, iterable_,
                                   resume_ ? &*resume_ : nullptr));
  return Loader(std::move(core));
}

}  // namespace pinwheel
