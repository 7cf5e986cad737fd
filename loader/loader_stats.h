// LoaderStats: the counters Loader::stats() returns, in a header of their
// own with those of the ring and the copy stage they include, so that
// loader.h need not include the stage itself.
#ifndef PINWHEEL_LOADER_LOADER_STATS_H_
#define PINWHEEL_LOADER_LOADER_STATS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "loader/auto_tune_stats.h"
#include "loader/cpu_budget.h"
#include "loader/telemetry/stage_latencies.h"
#include "pinning/pinned_ring_stats.h"
#include "transfer/transfer_stats.h"

namespace pinwheel {

// A consistent snapshot for the consumer's counters; ring and transfer are
// snapshots of their own, taken one after the other.
struct LoaderStats {
  int64_t batches_delivered = 0;
  int64_t samples_delivered = 0;
  int64_t bytes_delivered = 0;  // bytes copied for delivered batches
  // ErrorPolicy::kSkipSample: samples left out so far, counted when a worker
  // reads them (workers read ahead of the consumer, into the next epoch),
  // plus those the device transform could not produce (a corrupt JPEG on
  // the GPU decode path), counted when the stage drops them
  // (transfer.samples_skipped, the last cause in transfer.last_skipped).
  int64_t samples_skipped = 0;
  // pad_last_batch: padding samples delivered (not in samples_delivered).
  int64_t samples_padded = 0;
  // ErrorPolicy::kReplace: failed samples replaced so far (counted when a
  // worker reads them), and the last one's cause, naming both indices.
  int64_t samples_replaced = 0;
  std::string last_replaced;
  int64_t epochs_completed = 0;
  absl::Duration consumer_wait = absl::ZeroDuration();  // blocked in Next()
  // The part of consumer_wait in which the copy waited for a device buffer
  // the consumer held, or had released behind GPU work of its own not yet
  // done: the consumer's own back-pressure (its step is the bound there),
  // not the data's. Counted for delivered batches (Note [a wait behind the
  // consumer's buffers] in transfer/transfer_stage.cc).
  absl::Duration consumer_wait_behind_buffers = absl::ZeroDuration();
  // Page-locked host memory: constant, but with prefetch = kAuto the slots
  // the current depth has allocated (ring.bytes_pinned_peak: the most).
  size_t pinned_bytes = 0;
  size_t device_bytes = 0;  // device memory allocated, constant (0 with
                            // static_device_buffers: the caller's)
  // With a custom sampler that names sources (IndexSampler::num_sources(),
  // e.g. a MixtureDataset's order): delivered samples per source, counted as
  // Next() delivers them; empty otherwise.
  std::vector<int64_t> samples_per_source;
  // The gather path (LoaderOptions::gather): whether this loader uses it,
  // and when it does not, why (empty when it does): said once, at Build().
  bool gather = false;
  std::string gather_fallback;
  uint64_t gather_registered_bytes = 0;  // host bytes it registered anew
  // Whether the gather computes each batch's order and keys on the device
  // (no producer, no key upload; see LoaderOptions::gather).
  bool gather_order_on_device = false;
  // The CPUs this process may keep busy (affinity mask, cgroup quota, what
  // limits them), read once at Build(); see loader/cpu_budget.h.
  CpuBudget cpu_budget;
  // The workers Build() started (num_workers, or the number
  // kNumWorkersFromCpus chose; at most 1 on the gather path).
  int num_workers = 0;
  // What Build() said about the CPUs, a line each: that the loader's
  // threads left Open MPI's default one-core binding for the rank's share
  // (cpu_budget.worker_cpu_list; loader/worker_cpus.h); more workers than
  // cpu_budget.cpus (the CPUs, what limits them and the fix for the
  // launcher); and, over an IterableDataset, fewer pinned
  // slots than workers (each streamed batch is read by one worker into a
  // slot of its own) when the streams do not defer their samples' decode;
  // empty otherwise.
  std::string cpu_warning;
  // Per stage, p50/p90/p99/max since Build() and over the last
  // LatencyHistogram::kRecent batches (loader/telemetry/stage_latencies.h);
  // StallVerdictOf() (loader/telemetry/stall_verdict.h) reads them, and
  // loader/telemetry/stats_export.h writes them as JSON or Prometheus text.
  StageLatencies latency;
  // num_workers / prefetch = LoaderOptions::kAuto: their values now, the
  // number of changes and the last one's reason.
  AutoTuneStats auto_tune;
  PinnedRingStats ring;
  TransferStats transfer;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_LOADER_STATS_H_
