// The gather path (LoaderOptions::gather, loader/gather_source.h): for a
// dataset whose samples are fixed-size rows in host memory, the producer
// reads only one 8-byte key per sample into the pinned slot (GatherKeys, a
// Dataset of keys in the dataset's own order), and the transfer stage's
// writer (GatherWriter, gather_writer.h) uploads those keys and gathers the
// dataset's fields into the device buffer on the transfer stream (the
// device buffers, their fences and release rules are the stage's own).
// Everything that decides a batch's samples (sampler, resume, world size)
// is the worker path's, unchanged: the batches are the same bytes.
//
// PlanGather() decides, once per loader, whether the path can be used and
// says why not; it returns the path (loader/pipeline/loader_path.h).
// PlanLoaderPath() picks it, or the worker path with the reason.
//
// Note [one thread gathers]
// A key costs a multiply-add (a row) or a hash (a token window's start), so
// one thread computes a batch's keys in well under a microsecond per
// sample: more workers would only contend for the ring. The gather path runs
// with min(num_workers, 1) workers (LoaderPath::workers): the producer thread
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
// order::WindowStart (loader/epoch_order.h, the same functions the
// host samplers run, so the order is the host's bit for bit). The loader
// then uses no producer thread, no pinned ring and no key upload: Next()
// claims the batch (the host still computes its sample_indices, for
// BatchInfo) and submits it as a job with no slot (Producer::
// ProduceInline()); the GatherWriter computes its keys from the batch's
// place in the order (MapStyleSource::PositionOf), one kernel launch and
// one event record a batch, on the consumer's thread (or, when the only
// buffer left waits behind its fence, on the stage's copy thread), and
// Next() goes on submitting the next batches while a buffer is neither
// held by the consumer nor waiting for it (TransferStage::ReadyForJob():
// the device buffers are its read-ahead). The key checks of
// GatherKeys move to PlanGather: every index of the order is in
// [0, size), and the region is checked once to hold every key's bytes
// (rows: size rows; windows: starts + seq_len tokens). Measured on the
// H100 (2026-11-24, pinwheel_bench W2, 32 windows of 1,024 tokens, medians
// of 5): with keys uploaded by the consumer's thread, 20 us of CPU a batch
// and 0.59 of the raw copy; with the order on the device, 12.6 us and
// 1.05.
//
// Example (LoaderBuilder::Build):
//   PINWHEEL_ASSIGN_OR_RETURN(LoaderPath path, PlanLoaderPath(options,
//       device, layout, dataset, iterable, resume));
//   LoaderCore::Create(options, device, layout, std::move(path), resume);
#ifndef PINWHEEL_LOADER_GATHER_GATHER_PLAN_H_
#define PINWHEEL_LOADER_GATHER_GATHER_PLAN_H_

#include <memory>

#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "loader/iterable_dataset.h"
#include "loader/loader_checkpoint.h"
#include "loader/loader_options.h"
#include "loader/pipeline/loader_path.h"
#include "pinning/host_memory_limits.h"
#include "pinning/host_registration.h"
#include "transfer/device.h"
#include "transfer/sample_layout.h"

namespace pinwheel::internal {

// The one field of a GatherKeys sample.
inline constexpr char kGatherKeyField[] = "gather_key";

// Returns the gather path, or why it cannot be used for `dataset` with
// `options` on `device` (FailedPrecondition naming the reason; a refused
// registration or admission keeps its own code): gather = kOff, a
// device_transform set, a variable-length layout, a dataset without
// Gather() (or whose Gather() refuses or throws, e.g. a file larger than
// the memory left under `limits`), a GatherSource that does not match the
// layout, the registered bytes not admitted under `limits` next to the
// loader's ring and pool, or a registration `registry` refused; or the
// error of its batch source (no epoch can hold a batch). Registers the
// regions (held by the returned writer) only when everything else is fine.
// Small regions are read from a copy on pages of their own (see
// loader/gather/gather_memory.h). `resume` as for MakeWorkerPath().
// Thread-safe.
[[nodiscard]] absl::StatusOr<LoaderPath> PlanGather(
    const LoaderOptions& options, const Device& device,
    std::shared_ptr<const Dataset> dataset, const MemoryLimits& limits,
    HostRegistry& registry, const LoaderCheckpoint* resume = nullptr);

// Returns the gather path when PlanGather() allows it, else the worker
// path (MakeWorkerPath()) with the reason in gather.fallback;
// FailedPrecondition naming the reason when options.gather is kOn. `layout`
// and `resume` as for MakeWorkerPath(). Uses the process's memory limits
// and HostRegistry::Global().
[[nodiscard]] absl::StatusOr<LoaderPath> PlanLoaderPath(
    const LoaderOptions& options, const Device& device,
    const BatchLayout& layout, std::shared_ptr<const Dataset> dataset,
    std::shared_ptr<const IterableDataset> iterable,
    const LoaderCheckpoint* resume);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_GATHER_GATHER_PLAN_H_
