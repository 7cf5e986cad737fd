// LaunchEnvironment: this process's rank, the world size and its local rank
// (its index among the ranks on this node), read from the variables the
// job launcher sets, so one binary runs unchanged under any of them, on one
// node or several (tests/loader/multi_node_test.cc runs 2 nodes x 2 ranks
// as separate processes under torchrun's and Slurm's variables):
//
// clang-format off
//   launcher         rank                  world size            local rank
//   torchrun         RANK                  WORLD_SIZE            LOCAL_RANK
//   Open MPI mpirun  OMPI_COMM_WORLD_RANK  OMPI_COMM_WORLD_SIZE  OMPI_COMM_WORLD_LOCAL_RANK
//   MPICH/Intel PMI  PMI_RANK              PMI_SIZE              MPI_LOCALRANKID or PMI_LOCAL_RANK
//   Slurm srun       SLURM_PROCID          SLURM_NTASKS          SLURM_LOCALID
//   none of them     0                     1                     0
// clang-format on
//
// The rank shards the data (a pure function of rank and world size, so
// the node a rank runs on does not matter); the local rank picks the GPU
// (LocalDevice()).
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(LaunchEnvironment env,
//                             LaunchEnvironment::FromProcess());
//   // rank, world size and cuda:local_rank:
//   LoaderBuilder(dataset).distributed(env)...
//   // or, in one call that reads the environment in Build():
//   LoaderBuilder(dataset).distributed_from_launcher()...
//
// Note [which launcher wins]
// Launchers nest: `mpirun` inside an `sbatch` script inherits SLURM_PROCID=0
// and SLURM_NTASKS of the batch step, which describe the script, not this
// process. So Slurm's variables count only when no process launcher's
// (torchrun, Open MPI, PMI) are present. When several process launchers'
// variables are present they must agree on rank and world size, else it is
// InvalidArgument naming both sets: a stale variable exported by hand would
// otherwise shard the data wrongly and silently.
#ifndef PINWHEEL_LOADER_LAUNCH_ENVIRONMENT_H_
#define PINWHEEL_LOADER_LAUNCH_ENVIRONMENT_H_

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "transfer/device.h"

namespace pinwheel {

// Thread-compatible value type.
struct LaunchEnvironment {
  std::string launcher =
      "none";          // "torchrun", "openmpi", "pmi", "slurm", "none"
  int rank = 0;        // 0 <= rank < world_size
  int world_size = 1;  // >= 1
  int local_rank = 0;  // 0 <= local_rank < world_size
  // The ranks on this node when the launcher says (LOCAL_WORLD_SIZE,
  // OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE);
  // 0: unknown. Informational: it sizes advice, never the sharding.
  int local_world_size = 0;

  // Returns the environment from this process's variables (getenv).
  // InvalidArgument naming the variable and its value for a value that is
  // not a number in range, a launcher's set left incomplete, rank >=
  // world size, or launchers that disagree (Note [which launcher wins]).
  [[nodiscard]] static absl::StatusOr<LaunchEnvironment> FromProcess();
  // The same from `lookup`, which returns a variable's value or nullopt.
  [[nodiscard]] static absl::StatusOr<LaunchEnvironment> FromLookup(
      const std::function<std::optional<std::string>(absl::string_view)>&
          lookup);
  // The same from a map of variables (tests).
  [[nodiscard]] static absl::StatusOr<LaunchEnvironment> FromVariables(
      const std::map<std::string, std::string>& variables);

  // Returns the device this rank should use: cuda:local_rank when the
  // machine has more than local_rank GPUs; cuda:0 when it shows exactly one
  // (each rank sees its own through CUDA_VISIBLE_DEVICES, or they share it);
  // the host when it has none; else FailedPrecondition naming local rank and
  // GPU count.
  [[nodiscard]] absl::StatusOr<Device> LocalDevice() const;
  // The same rule for a node that shows `gpus` GPUs: the GPU index, -1 for
  // the host (LocalDevice() is GpuIndexAmong(Device::CudaDeviceCount())).
  [[nodiscard]] absl::StatusOr<int> GpuIndexAmong(int gpus) const;

  // "rank 1 of 4 (local rank 1, openmpi)".
  std::string ToString() const;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_LAUNCH_ENVIRONMENT_H_
