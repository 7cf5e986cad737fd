// Consumer pinning for the benchmark (--pin_consumer_cpu): while a
// ConsumerPin lives, the calling thread (the consumer, which calls Next())
// runs on one CPU alone and every other thread of the process is kept off
// that CPU; its destructor gives every thread the process's original CPU
// set back. Threads created while it lives inherit their creator's set
// (oneTBB's workers are started by the loader's threads, so they stay off
// the consumer's CPU). Linux only (sched_setaffinity per thread id).
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::optional<ConsumerPin> pin,
//                             ConsumerPin::Start(3));   // -1: no pinning
//   ... timed loop ...
//   pin.reset();  // or leave the scope
#ifndef PINWHEEL_SAMPLES_BENCH_THREAD_PINNING_H_
#define PINWHEEL_SAMPLES_BENCH_THREAD_PINNING_H_

#include <cerrno>
#include <cstdlib>
#include <dirent.h>
#include <optional>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

namespace pinwheel::bench {

// Move-only; use from one thread (the one that started it).
class ConsumerPin {
 public:
  // cpu < 0: returns nullopt (no pinning). Otherwise InvalidArgument naming
  // --pin_consumer_cpu when `cpu` is outside this process's CPU set or is
  // its only CPU, Internal when a thread's affinity cannot be set.
  [[nodiscard]] static absl::StatusOr<std::optional<ConsumerPin>> Start(
      int cpu) {
    if (cpu < 0) return std::optional<ConsumerPin>();
    cpu_set_t original;
    CPU_ZERO(&original);
    if (sched_getaffinity(0, sizeof(original), &original) != 0) {
      return absl::ErrnoToStatus(
          errno,
          absl::StrFormat("--pin_consumer_cpu=%d: sched_getaffinity", cpu));
    }
    if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &original)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--pin_consumer_cpu=%d: CPU %d is not in this process's CPU set "
          "(%d CPUs)",
          cpu, cpu, CPU_COUNT(&original)));
    }
    if (CPU_COUNT(&original) < 2) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--pin_consumer_cpu=%d: the process has only one CPU; the other "
          "threads would have none left",
          cpu));
    }
    ConsumerPin pin(original, cpu);
    cpu_set_t others = original;
    CPU_CLR(cpu, &others);
    cpu_set_t alone;
    CPU_ZERO(&alone);
    CPU_SET(cpu, &alone);
    const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
    for (pid_t tid : ThreadIds()) {
      const cpu_set_t& set = tid == self ? alone : others;
      // A thread that ended meanwhile (ESRCH) needs nothing.
      if (sched_setaffinity(tid, sizeof(set), &set) != 0 && errno != ESRCH) {
        return absl::ErrnoToStatus(
            errno, absl::StrFormat(
                       "--pin_consumer_cpu=%d: sched_setaffinity(thread %d)",
                       cpu, tid));
      }
    }
    return std::optional<ConsumerPin>(std::move(pin));
  }

  ConsumerPin(ConsumerPin&& other) noexcept
      : original_(other.original_), cpu_(std::exchange(other.cpu_, -1)) {}
  ConsumerPin& operator=(ConsumerPin&&) = delete;
  ConsumerPin(const ConsumerPin&) = delete;
  ConsumerPin& operator=(const ConsumerPin&) = delete;

  // Gives every thread of the process the original CPU set back (errors
  // ignored: a thread may have ended).
  ~ConsumerPin() {
    if (cpu_ < 0) return;
    for (pid_t tid : ThreadIds()) {
      sched_setaffinity(tid, sizeof(original_), &original_);
    }
  }

  int cpu() const { return cpu_; }

 private:
  ConsumerPin(const cpu_set_t& original, int cpu)
      : original_(original), cpu_(cpu) {}

  // Returns the ids of this process's threads (/proc/self/task).
  static std::vector<pid_t> ThreadIds() {
    std::vector<pid_t> ids;
    DIR* dir = opendir("/proc/self/task");
    if (dir == nullptr) return ids;
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
      ids.push_back(static_cast<pid_t>(std::atoi(entry->d_name)));
    }
    closedir(dir);
    return ids;
  }

  cpu_set_t original_;
  int cpu_ = -1;  // -1: moved from
};

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_THREAD_PINNING_H_
