#include "loader/pipeline/user_code.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneapi/tbb/task_arena.h"

#include "pinning/base/mutex.h"

namespace pinwheel::internal {
namespace {

// Returns a number for the calling thread that no other thread of the
// process ever gets (std::thread::id values are reused after a thread ends).
uint64_t ThisThreadToken() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t token =
      next.fetch_add(1, std::memory_order_relaxed);
  return token;
}

// Producer runs, numbered across every loader of the process.
std::atomic<uint64_t> next_run_id{1};

// The run and worker number this thread was last initialised for, to skip
// the lock on the common path.
struct InitCache {
  uint64_t run = 0;
  int number = -1;
};
thread_local InitCache init_cache;

}  // namespace

WorkerInit::WorkerInit(std::function<absl::Status(int worker)> init,
                       bool inline_mode, int workers)
    : init_(std::move(init)), inline_(inline_mode), workers_(workers) {}

void WorkerInit::StartRun() {
  {
    MutexLock lock(&mu_);
    initialized_.clear();  // worker_init runs again on every thread
    error_ = absl::OkStatus();
  }
  run_id_.store(next_run_id.fetch_add(1, std::memory_order_relaxed),
                std::memory_order_release);
}

void WorkerInit::Quiesce() { MutexLock lock(&mu_); }

absl::Status WorkerInit::error() const {
  MutexLock lock(&mu_);
  return error_;
}

int WorkerInit::WorkerNumber() const {
  if (inline_) return 0;  // the consumer's thread
  // Inside the arena: its slot, 0..workers-1 (the producer, a master, holds
  // the reserved slot 0). Threads in the arena at once hold distinct slots.
  const int slot = tbb::this_task_arena::current_thread_index();
  return slot >= 0 && slot < workers_ ? slot : 0;
}

absl::Status WorkerInit::EnsureRan() {
  if (!init_) return absl::OkStatus();
  const uint64_t run = run_id_.load(std::memory_order_acquire);
  const int number = WorkerNumber();
  if (init_cache.run == run && init_cache.number == number) {
    return absl::OkStatus();
  }
  const uint64_t thread = ThisThreadToken();
  {
    MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
    auto it = initialized_.find(thread);
    if (it != initialized_.end() && it->second == number) {
      init_cache = {run, number};
      return absl::OkStatus();
    }
  }
  absl::Status status = CallUser("worker_init", [&] { return init_(number); });
  if (status.ok()) {
    MutexLock lock(&mu_);
    initialized_[thread] = number;
    init_cache = {run, number};
    return status;
  }
  status =
      absl::Status(status.code(), absl::StrCat("worker_init failed for worker ",
                                               number, ": ", status.message()));
  MutexLock lock(&mu_);
  if (error_.ok()) error_ = status;
  return error_;
}

}  // namespace pinwheel::internal
