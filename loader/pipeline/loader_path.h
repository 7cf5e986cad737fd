// LoaderPath: how a loader's batches are made, decided once before anything
// is allocated: the BatchSource the producer claims and fills batches from,
// the BatchWriter that fills each device buffer (transfer/device_stage/),
// the layout the producer writes into a pinned slot, how many worker
// threads read, and what the gather path reported. LoaderCore wires
// whichever path it is given and never edits LoaderOptions.
//
// Two makers: MakeWorkerPath() (below: workers read each sample into a
// slot, the stage copies it, a device transform may follow) and
// PlanGather() (loader/gather/gather_plan.h: workers, or none, name keys;
// the stage gathers the samples on the device). PlanLoaderPath() there
// picks one.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(LoaderPath path,
//       MakeWorkerPath(options, layout, dataset, iterable, resume));
//   LoaderCore::Create(options, device, layout, std::move(path), resume);
//
// Thread-compatible (a plain value, moved into the LoaderCore).
#ifndef PINWHEEL_LOADER_PIPELINE_LOADER_PATH_H_
#define PINWHEEL_LOADER_PIPELINE_LOADER_PATH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "loader/iterable_dataset.h"
#include "loader/loader_checkpoint.h"
#include "loader/loader_options.h"
#include "loader/pipeline/auto_tune_policy.h"
#include "loader/pipeline/batch_source.h"
#include "transfer/device_stage/batch_writer.h"
#include "transfer/sample_layout.h"

namespace pinwheel::internal {

// Whether the gather path (LoaderOptions::gather) is used, and why not.
struct GatherReport {
  bool used = false;
  std::string fallback;  // why not (empty when used or never considered)
  uint64_t registered_bytes = 0;  // host bytes registered for this loader
  // Note [the order on the device] (loader/gather/gather_plan.h).
  bool order_on_device = false;
};

struct LoaderPath {
  std::unique_ptr<BatchSource> source;
  std::shared_ptr<BatchWriter> writer;
  // What the producer writes into a slot (the writer's slot_layout(); no
  // ring is made when that is null).
  BatchLayout fill_layout;
  int workers = 0;  // num_workers as run: 0 reads on the consumer's thread
  GatherReport gather;
  // What kAuto tunes (set by Build() once the path is known).
  AutoTunePlan auto_tune;
  // The CPUs the workers' arena moves its threads to; empty: they keep
  // the mask they inherit (set by Build(): loader/worker_cpus.h).
  std::vector<int> worker_cpus;
};

// Returns the bytes of each device buffer on the worker path for batches
// laid out by `layout` (see LoaderBuilder::device_buffer_bytes()), or the
// device transform's refusal naming the option.
absl::StatusOr<size_t> WorkerPathBufferBytes(const LoaderOptions& options,
                                             const BatchLayout& layout);

// Returns the worker path over `dataset` (or, when null, `iterable`) for
// batches laid out by `layout` (the delivered sample layout, pad_last_batch's
// mask included): options.num_workers workers, a copy of each slot and
// options.device_transform after it. `resume`, when not null, was checked
// by CheckResumable(). Errors name the option at fault.
absl::StatusOr<LoaderPath> MakeWorkerPath(
    const LoaderOptions& options, const BatchLayout& layout,
    std::shared_ptr<const Dataset> dataset,
    std::shared_ptr<const IterableDataset> iterable,
    const LoaderCheckpoint* resume);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_LOADER_PATH_H_
