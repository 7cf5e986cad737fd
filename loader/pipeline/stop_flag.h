// StopFlag: the one flag that tells every stage of a loader's pipeline to
// stop (Shutdown, StartEpoch, a kStop error). Thread-safe.
#ifndef PINWHEEL_LOADER_PIPELINE_STOP_FLAG_H_
#define PINWHEEL_LOADER_PIPELINE_STOP_FLAG_H_

#include <atomic>

namespace pinwheel::internal {

class StopFlag {
 public:
  // Returns whether the pipeline is stopping; checked before every sample.
  bool stopping() const { return stop_.load(std::memory_order_acquire); }
  // Waits that a stop must end also need their lock taken after Set(true):
  // see Producer::Stop().
  void Set(bool stop) { stop_.store(stop, std::memory_order_release); }

 private:
  std::atomic<bool> stop_{false};
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_STOP_FLAG_H_
