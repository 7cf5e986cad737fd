// Rendezvous: where the processes of one multi-process benchmark run meet,
// to start a timed loop together and to add up what each measured. Under
// mpirun (built with MPI) it is MPI; under any launcher (torchrun, Slurm,
// mpirun without MPI in the build) it is a folder the ranks share: each
// contribution is a small file, written whole (a temporary file renamed),
// that the other ranks wait for. Those files stay: they are every rank's
// own numbers, one file per rank and step.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<Rendezvous> r,
//       FileRendezvous::Open("/tmp/run1", env.rank, env.world_size));
//   PINWHEEL_RETURN_IF_ERROR(r->Barrier("start"));
//   PINWHEEL_ASSIGN_OR_RETURN(auto all, r->AllGather("w1", {bytes, secs}));
//   // all[rank] is that rank's {bytes, secs}
#ifndef PINWHEEL_SAMPLES_BENCH_RENDEZVOUS_H_
#define PINWHEEL_SAMPLES_BENCH_RENDEZVOUS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pinwheel::bench {

// Not thread-safe: one thread of each process calls, every rank making the
// same calls in the same order (the steps are numbered by that order).
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // "one process", "mpi", "files in DIR".
  virtual std::string Describe() const = 0;

  // Returns every rank's `values`, indexed by rank, once all ranks gave
  // theirs for this step. `tag` names the step in errors (and in files).
  [[nodiscard]] virtual absl::StatusOr<std::vector<std::vector<double>>>
  AllGather(absl::string_view tag, const std::vector<double>& values) = 0;

  // Called when this rank fails with `error`, so that the others do not
  // wait for it forever: MPI aborts the job; the files leave a note that
  // makes the other ranks' waiting calls return Aborted naming this rank.
  virtual void Abandon(const absl::Status& error) { (void)error; }

  // Returns once every rank reached this step.
  [[nodiscard]] absl::Status Barrier(absl::string_view tag) {
    return AllGather(tag, {}).status();
  }
};

// Returns the rendezvous of a run of one process (every call returns at
// once with this process's values).
std::unique_ptr<Rendezvous> SingleProcessRendezvous();

// The shared-folder rendezvous. Not thread-safe (see Rendezvous).
class FileRendezvous final : public Rendezvous {
 public:
  // Returns the rendezvous of `rank` of `world_size` in `dir` (created if
  // missing). InvalidArgument for a rank out of range; FailedPrecondition
  // when `dir` already holds a file of this rank (an earlier run's: give
  // each run a folder of its own); Internal naming the folder when it cannot
  // be created. A rank whose files do not appear within `timeout` makes the
  // waiting call return DeadlineExceeded naming the missing ranks and step;
  // one that abandoned the run, Aborted with its error.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Rendezvous>> Open(
      const std::string& dir, int rank, int world_size,
      absl::Duration timeout = absl::Seconds(300));

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string Describe() const override;
  absl::StatusOr<std::vector<std::vector<double>>> AllGather(
      absl::string_view tag, const std::vector<double>& values) override;
  void Abandon(const absl::Status& error) override;

 private:
  FileRendezvous(std::string dir, int rank, int world_size,
                 absl::Duration timeout)
      : dir_(std::move(dir)),
        rank_(rank),
        world_size_(world_size),
        timeout_(timeout) {}
  // Returns the file of `rank`'s contribution to step `step`.
  std::string PathOf(int step, absl::string_view tag, int rank) const;
  // Returns the note Abandon() leaves for `rank`.
  std::string FailurePathOf(int rank) const;

  std::string dir_;
  int rank_;
  int world_size_;
  absl::Duration timeout_;
  int step_ = 0;
};

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_RENDEZVOUS_H_
