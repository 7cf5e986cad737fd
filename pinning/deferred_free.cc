#include "pinning/deferred_free.h"

#include <utility>

#include "pinning/base/mutex.h"

namespace pinwheel::internal {

DeferredFree::~DeferredFree() {
  std::thread thread;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    thread = std::move(thread_);
  }
  if (thread.joinable()) thread.join();  // Run() frees what is queued first
}

void DeferredFree::Free(HostAllocation block) {
  if (block.data() == nullptr) return;
  MutexLock lock(&mu_);
  queued_.push_back(std::move(block));
  ++handed_;
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void DeferredFree::Drain() {
  MutexLock lock(&mu_);
  const int64_t handed = handed_;
  Await(mu_, [this, handed]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return freed_ >= handed;
  });
}

int64_t DeferredFree::freed() const {
  MutexLock lock(&mu_);
  return freed_;
}

void DeferredFree::Run() {
  while (true) {
    HostAllocation block;
    {
      MutexLock lock(&mu_);
      Await(mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queued_.empty();
      });
      if (queued_.empty()) return;  // stopped, nothing left to free
      block = std::move(queued_.front());
      queued_.pop_front();
    }
    block = HostAllocation();  // unlocked: cudaFreeHost may wait for the GPU
    MutexLock lock(&mu_);
    ++freed_;
  }
}

}  // namespace pinwheel::internal
