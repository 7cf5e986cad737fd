// ReadsInFlight: which user read each worker is in (a Dataset's Read or a
// SampleStream's Next), so that a Shutdown() that gives up on a read that
// never returns can name it (Note [abandoning a stuck read] in
// loader_core.cc). One entry per worker number; a worker runs one read at a
// time.
//
// Example (BatchFiller):
//   reads.Begin(worker, {.epoch = 0, .batch = 3, .index = 17});
//   status = dataset.Read(17, view);
//   reads.End(worker);
//
// Thread-safe: Begin()/End() from the workers (each on its own entry, a few
// relaxed stores: nothing on the fast path waits), Running() from any
// thread. Running() is a snapshot: a read that is stuck is reported
// exactly; one that begins or ends meanwhile may be missed.
#ifndef PINWHEEL_LOADER_PIPELINE_READS_IN_FLIGHT_H_
#define PINWHEEL_LOADER_PIPELINE_READS_IN_FLIGHT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pinwheel::internal {

// One read a worker is in.
struct RunningRead {
  int64_t epoch = 0;
  int64_t batch = 0;
  int64_t index = -1;   // the dataset index; -1 for an IterableDataset
  int shard = -1;       // IterableDataset: the shard read
  bool finish = false;  // IterableDataset: a sample's deferred finish
  int worker = 0;       // the worker number (see LoaderOptions::worker_init)

  // Returns e.g. "Read(index 17) of batch 3, epoch 0, worker 1".
  std::string ToString() const {
    const std::string what =
        index >= 0 ? absl::StrCat("Read(index ", index, ")")
        : finish   ? absl::StrCat("a SampleFinish of shard ", shard)
                   : absl::StrCat("SampleStream::Next() of shard ", shard);
    return absl::StrCat(what, " of batch ", batch, ", epoch ", epoch,
                        ", worker ", worker);
  }
};

class ReadsInFlight {
 public:
  // `workers`: worker numbers are 0..workers-1.
  explicit ReadsInFlight(int workers)
      : workers_(workers < 1 ? 1 : workers),
        entries_(std::make_unique<Entry[]>(static_cast<size_t>(workers_))) {}

  // Worker `worker` starts `read` (its worker field is ignored).
  void Begin(int worker, const RunningRead& read) {
    Entry& e = entries_[Clamp(worker)];
    e.epoch.store(read.epoch, std::memory_order_relaxed);
    e.batch.store(read.batch, std::memory_order_relaxed);
    e.index.store(read.index, std::memory_order_relaxed);
    e.shard.store(read.shard, std::memory_order_relaxed);
    e.finish.store(read.finish, std::memory_order_relaxed);
    e.busy.store(true, std::memory_order_release);
  }
  // Worker `worker`'s read returned.
  void End(int worker) {
    entries_[Clamp(worker)].busy.store(false, std::memory_order_release);
  }

  // Returns the reads running now, by worker number.
  std::vector<RunningRead> Running() const {
    std::vector<RunningRead> running;
    for (int w = 0; w < workers_; ++w) {
      const Entry& e = entries_[static_cast<size_t>(w)];
      if (!e.busy.load(std::memory_order_acquire)) continue;
      running.push_back({.epoch = e.epoch.load(std::memory_order_relaxed),
                         .batch = e.batch.load(std::memory_order_relaxed),
                         .index = e.index.load(std::memory_order_relaxed),
                         .shard = e.shard.load(std::memory_order_relaxed),
                         .finish = e.finish.load(std::memory_order_relaxed),
                         .worker = w});
    }
    return running;
  }

 private:
  struct Entry {
    std::atomic<bool> busy{false};
    std::atomic<int64_t> epoch{0};
    std::atomic<int64_t> batch{0};
    std::atomic<int64_t> index{-1};
    std::atomic<int> shard{-1};
    std::atomic<bool> finish{false};
  };

  size_t Clamp(int worker) const {
    return static_cast<size_t>(worker >= 0 && worker < workers_ ? worker : 0);
  }

  const int workers_;
  const std::unique_ptr<Entry[]> entries_;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_READS_IN_FLIGHT_H_
