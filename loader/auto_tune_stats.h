// AutoTuneStats: what the run-time tuner of num_workers and prefetch
// (LoaderOptions::kAuto) has done, in LoaderStats::auto_tune.
#ifndef PINWHEEL_LOADER_AUTO_TUNE_STATS_H_
#define PINWHEEL_LOADER_AUTO_TUNE_STATS_H_

#include <cstdint>
#include <string>

namespace pinwheel {

// A value; thread-compatible.
struct AutoTuneStats {
  // Whether num_workers / prefetch were kAuto and are tuned on this path.
  bool workers_auto = false;
  bool prefetch_auto = false;
  // Why kAuto tunes nothing here (the gather path); empty otherwise.
  std::string off_reason;
  // Workers allowed to read now, and the most it may use (the threads
  // started: LoaderOptions::auto_max_workers, or from the CPU budget).
  // Without workers_auto both are num_workers.
  int workers = 0;
  int max_workers = 0;
  // Pinned slots usable now (the prefetch depth), and the most it may use
  // (64, lowered to what auto_max_pinned_bytes and the host memory admit).
  // Without prefetch_auto both are prefetch.
  int prefetch = 0;
  int max_prefetch = 0;
  int64_t changes = 0;            // changes of workers or prefetch so far
  int64_t last_change_batch = 0;  // batches delivered at the last change
  std::string last_reason;  // the last change's line (see loader/README.md)
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_AUTO_TUNE_STATS_H_
