// Collective: what data-parallel training needs from the other ranks. One
// process per GPU (or per CPU rank on the host backend), started by mpirun
// or srun; each trains on its shard of every epoch and averages gradients
// with the others after each step, so all ranks keep the same weights.
//
//   backend   gradient average                        metrics, coverage
//   host      MPI_Allreduce (sum, then / world)       MPI_Allreduce
//   cuda      ncclAllReduce(ncclAvg) on the compute   MPI_Allreduce
//             stream (unique id broadcast over MPI)
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<Collective> c,
//                             Collective::ForLaunch(env, &argc, &argv));
//   mlp->set_gradient_hook([&](float* g, int64_t n, void* stream) {
//     return c->AverageGradient(g, n, stream);
//   });
#ifndef PINWHEEL_SAMPLES_TRAIN_COLLECTIVE_H_
#define PINWHEEL_SAMPLES_TRAIN_COLLECTIVE_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

#include "loader/launch_environment.h"

namespace pinwheel::train {

// Not thread-safe: the trainer's one thread calls it, every rank making the
// same calls in the same order (they are collective).
class Collective {
 public:
  virtual ~Collective() = default;

  // Returns the collective for this launch: a single-process one when
  // env.world_size == 1 (MPI is not touched), else MPI (initialised here;
  // finalised by the destructor). FailedPrecondition when launched as
  // several ranks but built without MPI, or when MPI's ranks disagree with
  // the launcher's variables.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Collective>> ForLaunch(
      const LaunchEnvironment& env, int* argc, char*** argv);
  // Returns whether this trainer was built with MPI / with NCCL.
  static bool MpiBuilt();
  static bool NcclBuilt();

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Averages `count` floats over the ranks, in place. Without UseNccl():
  // host memory, blocking. After UseNccl(): device memory, queued on the
  // cudaStream_t `stream` (no host synchronisation).
  [[nodiscard]] virtual absl::Status AverageGradient(float* data, int64_t count,
                                                     void* stream) = 0;
  // Sums each element over the ranks, in place (host memory, blocking).
  [[nodiscard]] virtual absl::Status SumHost(std::vector<double>& values) = 0;
  [[nodiscard]] virtual absl::Status SumHost(std::vector<int32_t>& values) = 0;
  // Gathers `bytes` bytes from every rank into `all` (world_size × bytes,
  // rank r's at r × bytes), host memory, blocking: how the ranks' RankWait
  // records (loader/telemetry/rank_wait.h) reach each other.
  [[nodiscard]] virtual absl::Status AllGatherBytes(
      const void* mine, size_t bytes, std::vector<uint8_t>& all) = 0;
  [[nodiscard]] virtual absl::Status Barrier() = 0;
  // Switches AverageGradient to NCCL on CUDA device `ordinal` (rank 0's
  // unique id broadcast over MPI). FailedPrecondition when built without
  // NCCL. A no-op with one rank.
  [[nodiscard]] virtual absl::Status UseNccl(int ordinal) = 0;
  // Ends every rank's process with `code` (MPI_Abort) so that no rank waits
  // forever in a collective for one that failed; returns with one rank.
  virtual void Abort(int code) = 0;
  // "1 process", "MPI, 2 ranks (MPI_Allreduce)", "MPI + NCCL 2.28, 2 ranks".
  virtual std::string Describe() const = 0;
};

// Prints on rank 0 only (the other ranks' numbers reach it by SumHost), and
// flushes stdout.
template <typename... Args>
void Say(const Collective& collective, const absl::FormatSpec<Args...>& format,
         const Args&... args) {
  if (collective.rank() != 0) return;
  absl::PrintF(format, args...);
  std::fflush(stdout);
}

}  // namespace pinwheel::train

#endif  // PINWHEEL_SAMPLES_TRAIN_COLLECTIVE_H_
