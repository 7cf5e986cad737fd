// OneCpu: narrows the calling thread to the first CPU of its affinity mask
// for a test's scope, the way a launcher's one-core binding would; restores
// the mask on destruction. Threads started meanwhile inherit the one CPU.
//
// Example:
//   OneCpu one_cpu;
//   ASSERT_TRUE(one_cpu.narrowed());
//   ... LoaderBuilder(...).Build() sees a budget of 1 CPU ...
#ifndef PINWHEEL_TESTS_SUPPORT_ONE_CPU_H_
#define PINWHEEL_TESTS_SUPPORT_ONE_CPU_H_

#include <sched.h>

namespace pinwheel::testing_support {

// Not thread-safe; affects the calling thread only.
class OneCpu {
 public:
  OneCpu() {
    ok_ = sched_getaffinity(0, sizeof(saved_), &saved_) == 0;
    for (int cpu = 0; ok_ && cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &saved_)) continue;
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      narrowed_ = sched_setaffinity(0, sizeof(one), &one) == 0;
      break;
    }
  }
  ~OneCpu() {
    if (narrowed_) sched_setaffinity(0, sizeof(saved_), &saved_);
  }
  OneCpu(const OneCpu&) = delete;
  OneCpu& operator=(const OneCpu&) = delete;

  // Returns whether the mask was narrowed (and will be restored).
  bool narrowed() const { return narrowed_; }

 private:
  cpu_set_t saved_;
  bool ok_ = false;
  bool narrowed_ = false;
};

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_ONE_CPU_H_
