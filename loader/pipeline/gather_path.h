// The gather path (LoaderOptions::gather, loader/gather_source.h): for a
// dataset whose samples are fixed-size rows in host memory, the producer
// reads only one 8-byte key per sample into the pinned slot (GatherKeys, a
// Dataset of keys in the dataset's own order), the transfer stage uploads
// those keys and a gather on the transfer stream writes the dataset's
// fields into the device buffer (GatherTransform, a DeviceTransform, so
// the device buffers, their fences and release rules are the stage's own).
// Everything that decides a batch's samples (sampler, resume, world size)
// is the worker path's, unchanged: the batches are the same bytes.
//
// PlanGather() decides, once per loader, whether the path can be used and
// says why not.
//
// Note [one thread gathers]
// A key costs a multiply-add (a row) or a hash (a token window's start), so
// one thread computes a batch's keys in well under a microsecond per
// sample: more workers would only contend for the ring. LoaderCore runs the
// gather path with num_workers = min(num_workers, 1): the producer thread
// (or, with num_workers = 0, the consumer's thread inside Next()). The
// sample bytes move only on the device (or, on the host backend, on its
// copy thread).
//
// Note [the order on the device]
// The keys need not travel at all when the gather can compute them: with
// the loader's own order (no custom IndexSampler) and keys that are the
// index itself or the token windows' start (GatherSource::window_keys), a
// batch is fully named by (epoch's Deal, first position, samples), and the
// kernel computes each sample's index with order::DealAt and its key with
// order::WindowStart (pinning/base/epoch_order.h, the same functions the
// host samplers run, so the order is the host's bit for bit). The loader
// then uses no producer thread, no ring slot and no key upload: Next()
// claims the batch (the host still computes its sample_indices, for
// BatchInfo) and issues it straight into a device buffer
// (TransferStage::Issue), one kernel launch and one event record a batch,
// on the consumer's thread, and goes on issuing the next batches while a
// buffer is free (the device buffers are its read-ahead). The key checks of
// GatherKeys move to PlanGather: every index of the order is in
// [0, size), and the region is checked once to hold every key's bytes
// (rows: size rows; windows: starts + seq_len tokens). Measured on the
// H100 (2026-11-24, pinwheel_bench W2, 32 windows of 1,024 tokens, medians
// of 5): with keys uploaded by the consumer's thread, 20 us of CPU a batch
// and 0.59 of the raw copy; with the order on the device, 12.6 us and
// 1.05.
//
// Example (LoaderCore::Create):
//   absl::StatusOr<GatherPlan> gather = PlanGather(options, device, dataset,
//       ReadMemoryLimits(), HostRegistry::Global());
//   if (gather.ok()) { /* read gather->keys, run gather->transform */ }
#ifndef PINWHEEL_LOADER_PIPELINE_GATHER_PATH_H_
#define PINWHEEL_LOADER_PIPELINE_GATHER_PATH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "loader/gather_source.h"
#include "loader/loader_options.h"
#include "pinning/host_memory_limits.h"
#include "pinning/host_registration.h"
#include "transfer/device.h"
#include "transfer/device_transform.h"
#include "transfer/internal/gather.h"
#include "transfer/stream.h"

namespace pinwheel::internal {

// The one field of a GatherKeys sample.
inline constexpr char kGatherKeyField[] = "gather_key";

// The gather of Note [the order on the device]: writes the batch of
// `order` (batch.samples samples) into batch.output on `stream`.
// Thread-safe (immutable).
class OrderedGather {
 public:
  virtual ~OrderedGather() = default;
  // `order.deal` and `order.first` name the batch; the rest is the
  // gather's own (filled in by Run).
  [[nodiscard]] virtual absl::Status Run(GatherOrder order,
                                         const DeviceTransformBatch& batch,
                                         const Stream& stream) const = 0;
};

// What a loader on the gather path reads and runs instead of the dataset.
struct GatherPlan {
  // Read by the producer: sample i is the dataset's key of i (i64).
  std::shared_ptr<const Dataset> keys;
  // Run by the transfer stage: the gather, delivering the dataset's fields.
  std::shared_ptr<const DeviceTransform> transform;
  // Host bytes registered for this loader (already admitted).
  uint64_t registered_bytes = 0;
  // Set when the keys can be computed on the device (Note [the order on the
  // device]): the same gather as `transform`, run without keys.
  std::shared_ptr<const OrderedGather> ordered;
};

// Returns the plan, or why the gather path cannot be used for `dataset`
// with `options` on `device` (FailedPrecondition naming the reason; a
// refused registration or admission keeps its own code): gather = kOff, a
// device_transform set, a variable-length layout, a dataset without
// Gather() (or whose Gather() refuses, e.g. a file larger than the memory
// left under `limits`), a GatherSource that does not match the layout, the
// registered bytes not admitted under `limits` next to the loader's ring
// and pool, or a registration `registry` refused. Registers the regions
// (held by the returned transform) only when everything else is fine.
// Small regions are read from a copy on pages of their own (see
// loader/pipeline/gather_memory.h). Thread-safe.
[[nodiscard]] absl::StatusOr<GatherPlan> PlanGather(
    const LoaderOptions& options, const Device& device,
    std::shared_ptr<const Dataset> dataset, const MemoryLimits& limits,
    HostRegistry& registry);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_GATHER_PATH_H_
