// What pinwheel_multi_bench times, each on every loader (or GPU) of this
// process at once and, through a Rendezvous, of every process at once: the
// raw pinned copy, and pinwheel loaders on one path (the workers or the
// gather). Each returns this process's share; the caller adds the ranks'.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(ProcessShare raw,
//       RawCopyAtOnce(gpus, batch_bytes, batches, rendezvous));
//   PINWHEEL_ASSIGN_OR_RETURN(ProcessShare mine,
//       LoadersAtOnce(devices, dataset, config, rendezvous));
#ifndef PINWHEEL_SAMPLES_BENCH_MULTI_ROWS_H_
#define PINWHEEL_SAMPLES_BENCH_MULTI_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "loader/loader_options.h"
#include "samples/bench/rendezvous.h"
#include "transfer/device.h"

namespace pinwheel::bench {

// One process's part of a timed row.
struct ProcessShare {
  double batches = 0;      // batches delivered (or copied), all loaders
  double seconds = 0;      // from the common start to its last loader's end
  double cpu_seconds = 0;  // process CPU time (every thread) over that time
  // Returns the cores this process kept busy: CPU time over wall time.
  double cores() const { return seconds > 0 ? cpu_seconds / seconds : 0; }
};

struct LoaderRowConfig {
  int64_t batch_size = 256;
  int workers = 4;
  int prefetch = 4;
  int device_buffers = 2;
  GatherMode gather = GatherMode::kOff;  // kOn: the gather path
  int warmup = 5;                        // untimed batches per loader, >= 1
  int batches = 100;                     // timed batches per loader
  uint64_t seed = 7;                     // shuffle seed
  bool keep_launcher_binding = false;    // LoaderOptions' own
};

// Returns whether this binary was built with the cuda backend's raw copy.
bool RawCopyBuilt();

// Copies `bytes` from a page-locked buffer to each GPU of `gpus`
// `batches` times (cudaMemcpyAsync on a stream of its own, one thread a
// GPU), every process at once. FailedPrecondition without CUDA.
[[nodiscard]] absl::StatusOr<ProcessShare> RawCopyAtOnce(
    const std::vector<Device>& gpus, size_t bytes, int batches,
    Rendezvous& rendezvous);

// The worker path without a loader, its ceiling on this host: per GPU of
// `gpus`, `threads` threads each copy whole batches of `batch_bytes` from a
// pageable source of `source_bytes` (cycled; make it larger than the
// last-level cache, as a dataset is) into one of two page-locked buffers of
// their own (memcpy, or non-temporal stores when `streaming`) and queue its
// copy to the device on a stream of their own while they fill the other:
// the host-memory traffic of the worker path (read the sample, write the
// pinned slot, the DMA reads it) with no loader around it. Every process at
// once, `batches` batches a GPU split over its threads. FailedPrecondition
// without CUDA.
struct StagedCopyConfig {
  size_t batch_bytes = 0;
  size_t source_bytes = 0;
  int threads = 1;
  int batches = 100;
  bool streaming = false;
};
[[nodiscard]] absl::StatusOr<ProcessShare> StagedCopyAtOnce(
    const std::vector<Device>& gpus, const StagedCopyConfig& config,
    Rendezvous& rendezvous);

// Builds one loader over `dataset` per entry of `devices` (each with a
// consumer thread and stream of its own), takes `config.warmup` batches
// from each, then, every loader of every process released at once, times
// `config.batches` batches each (waited on and released on the consumer's
// stream, no host sync per batch). Errors name the device.
[[nodiscard]] absl::StatusOr<ProcessShare> LoadersAtOnce(
    const std::vector<Device>& devices, std::shared_ptr<const Dataset> dataset,
    const LoaderRowConfig& config, Rendezvous& rendezvous);

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_MULTI_ROWS_H_
