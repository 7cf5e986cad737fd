// The host backend: streams are threads running their queues in order,
// events are completion counters, device memory is page-aligned host memory.
// It follows CUDA's semantics closely enough that every ordering and
// lifetime rule of the pipeline can be tested without a GPU, under TSan.
#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

#include "pinning/base/mutex.h"
#include "pinning/host_allocation.h"
#include "transfer/internal/backend.h"

namespace pinwheel::internal {
namespace {

// Completion state of an event; shared with the queued tasks that complete
// it, so an Event may be destroyed with a record still pending (as in CUDA).
struct HostEventState {
  absl::Mutex mu;
  uint64_t recorded ABSL_GUARDED_BY(mu) = 0;
  uint64_t completed ABSL_GUARDED_BY(mu) = 0;

  void Complete(uint64_t target) {
    MutexLock lock(&mu);
    completed = std::max(completed, target);
  }
};

struct HostEvent {
  std::shared_ptr<HostEventState> state = std::make_shared<HostEventState>();
};

// A thread running tasks in submission order.
class HostQueue {
 public:
  HostQueue() : thread_([this] { Run(); }) {}
  ~HostQueue() {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();  // drains what was queued first
  }

  void Enqueue(std::function<void()> task) {
    MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
    ++enqueued_;
  }

  void Synchronize() {
    MutexLock lock(&mu_);
    const uint64_t target = enqueued_;
    auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return finished_ >= target;
    };
    Await(mu_, done);
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> task;
      {
        MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !tasks_.empty();
        };
        Await(mu_, ready);
        if (tasks_.empty()) return;  // stopping, and drained
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
      MutexLock lock(&mu_);
      ++finished_;
    }
  }

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

void WaitUntil(const std::shared_ptr<HostEventState>& state, uint64_t target) {
  MutexLock lock(&state->mu);
  auto done = [&state, target]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return state->completed >= target;
  };
  Await(state->mu, done);
}

class HostBackendImpl final : public Backend {
 public:
  absl::StatusOr<void*> CreateStream(int) override { return new HostQueue(); }
  void DestroyStream(int, void* stream) override {
    delete static_cast<HostQueue*>(stream);
  }
  absl::StatusOr<void*> CreateEvent(int) override { return new HostEvent(); }
  void DestroyEvent(int, void* event) override {
    delete static_cast<HostEvent*>(event);
  }

  absl::Status RecordEvent(int, void* event, void* stream) override {
    std::shared_ptr<HostEventState> state =
        static_cast<HostEvent*>(event)->state;
    uint64_t target;
    {
      MutexLock lock(&state->mu);
      target = ++state->recorded;
      if (stream == nullptr) state->completed = target;  // calling thread
    }
    if (stream != nullptr) {
      static_cast<HostQueue*>(stream)->Enqueue(
          [state, target] { state->Complete(target); });
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> QueryEvent(int, void* event) override {
    HostEventState& state = *static_cast<HostEvent*>(event)->state;
    MutexLock lock(&state.mu);
    return state.completed >= state.recorded;
  }

  absl::Status SynchronizeEvent(int, void* event) override {
    std::shared_ptr<HostEventState> state =
        static_cast<HostEvent*>(event)->state;
    uint64_t target;
    {
      MutexLock lock(&state->mu);
      target = state->recorded;
    }
    WaitUntil(state, target);
    return absl::OkStatus();
  }

  absl::Status StreamWaitEvent(int, void* stream, void* event) override {
    std::shared_ptr<HostEventState> state =
        static_cast<HostEvent*>(event)->state;
    uint64_t target;
    {
      MutexLock lock(&state->mu);
      target = state->recorded;
    }
    if (stream == nullptr) {
      WaitUntil(state, target);
    } else {
      static_cast<HostQueue*>(stream)->Enqueue(
          [state, target] { WaitUntil(state, target); });
    }
    return absl::OkStatus();
  }

  absl::Status CopyAsync(int, void* stream, void* dst, const void* src,
                         size_t bytes, CopyDirection) override {
    if (stream == nullptr) {
      std::memcpy(dst, src, bytes);
    } else {
      static_cast<HostQueue*>(stream)->Enqueue(
          [dst, src, bytes] { std::memcpy(dst, src, bytes); });
    }
    return absl::OkStatus();
  }

  absl::Status ZeroAsync(int, void* stream, void* dst, size_t bytes) override {
    if (stream == nullptr) {
      std::memset(dst, 0, bytes);
    } else {
      static_cast<HostQueue*>(stream)->Enqueue(
          [dst, bytes] { std::memset(dst, 0, bytes); });
    }
    return absl::OkStatus();
  }

  absl::Status LaunchHostTask(int, void* stream,
                              std::function<void()> task) override {
    if (stream == nullptr) {
      task();
    } else {
      static_cast<HostQueue*>(stream)->Enqueue(std::move(task));
    }
    return absl::OkStatus();
  }

  absl::Status SynchronizeStream(int, void* stream) override {
    if (stream != nullptr) static_cast<HostQueue*>(stream)->Synchronize();
    return absl::OkStatus();
  }

  absl::StatusOr<void*> AllocateDevice(int, size_t bytes) override {
    absl::StatusOr<HostAllocation> block =
        HostAllocation::Allocate(bytes, HostMemoryKind::kPageable);
    if (!block.ok()) {
      return absl::Status(block.status().code(),
                          absl::StrCat("host backend device memory: ",
                                       block.status().message()));
    }
    auto* owner = new HostAllocation(*std::move(block));
    return static_cast<void*>(Register(owner));
  }

  void FreeDevice(int, void* ptr) override {
    MutexLock lock(&mu_);
    auto it = std::find_if(blocks_.begin(), blocks_.end(),
                           [ptr](const std::unique_ptr<HostAllocation>& b) {
                             return b->data() == ptr;
                           });
    if (it != blocks_.end()) blocks_.erase(it);
  }

 private:
  std::byte* Register(HostAllocation* block) {
    MutexLock lock(&mu_);
    blocks_.emplace_back(block);
    return block->data();
  }

  absl::Mutex mu_;
  std::vector<std::unique_ptr<HostAllocation>> blocks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

Backend& HostBackend() {
  static Backend* backend = new HostBackendImpl();
  return *backend;
}

}  // namespace pinwheel::internal
