#include "loader/launch_environment.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pinwheel {
namespace {

using Lookup = std::function<std::optional<std::string>(absl::string_view)>;

// One launcher's variables; local rank may have alternatives (PMI).
struct LauncherSpec {
  const char* name;
  const char* rank;
  const char* size;
  std::vector<const char*> local_rank;  // the first present one is used
  // The ranks on this node, where the launcher says (informational).
  const char* local_size;
};

const std::vector<LauncherSpec>& ProcessLaunchers() {
  static const auto* specs = new std::vector<LauncherSpec>{
      {"torchrun", "RANK", "WORLD_SIZE", {"LOCAL_RANK"}, "LOCAL_WORLD_SIZE"},
      {"openmpi",
       "OMPI_COMM_WORLD_RANK",
       "OMPI_COMM_WORLD_SIZE",
       {"OMPI_COMM_WORLD_LOCAL_RANK"},
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"pmi",
       "PMI_RANK",
       "PMI_SIZE",
       {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"},
       "MPI_LOCALNRANKS"},
  };
  return *specs;
}

const LauncherSpec& Slurm() {
  static const auto* spec = new LauncherSpec{"slurm",
                                             "SLURM_PROCID",
                                             "SLURM_NTASKS",
                                             {"SLURM_LOCALID"},
                                             "SLURM_NTASKS_PER_NODE"};
  return *spec;
}

absl::StatusOr<int> ParseInt(const char* variable, const std::string& value,
                             int min) {
  int parsed = 0;
  // Digits only: SimpleAtoi would also take " 2" or "+2".
  const bool digits = !value.empty() && std::all_of(value.begin(), value.end(),
                                                    absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(value, &parsed) || parsed < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch environment: ", variable, "='", value,
                     "' is not a whole number >= ", min));
  }
  return parsed;
}

// Returns the launcher's environment, nullopt when none of its variables is
// set, or InvalidArgument for a bad or incomplete set.
absl::StatusOr<std::optional<LaunchEnvironment>> Read(const LauncherSpec& spec,
                                                      const Lookup& lookup) {
  const std::optional<std::string> rank = lookup(spec.rank);
  const std::optional<std::string> size = lookup(spec.size);
  std::optional<std::string> local;
  const char* local_name = spec.local_rank.front();
  for (const char* name : spec.local_rank) {
    if ((local = lookup(name))) {
      local_name = name;
      break;
    }
  }
  if (!rank && !size) return std::optional<LaunchEnvironment>();
  if (!rank || !size || !local) {
    std::vector<std::string> missing;
    if (!rank) missing.push_back(spec.rank);
    if (!size) missing.push_back(spec.size);
    if (!local) missing.push_back(absl::StrJoin(spec.local_rank, " or "));
    return absl::InvalidArgumentError(absl::StrCat(
        "launch environment: ", spec.name, " variables are incomplete: ",
        rank ? absl::StrCat(spec.rank, "='", *rank, "' ") : "",
        size ? absl::StrCat(spec.size, "='", *size, "' ") : "", "but ",
        absl::StrJoin(missing, ", "), " not set"));
  }
  LaunchEnvironment env;
  env.launcher = spec.name;
  absl::StatusOr<int> parsed = ParseInt(spec.rank, *rank, 0);
  if (!parsed.ok()) return parsed.status();
  env.rank = *parsed;
  parsed = ParseInt(spec.size, *size, 1);
  if (!parsed.ok()) return parsed.status();
  env.world_size = *parsed;
  parsed = ParseInt(local_name, *local, 0);
  if (!parsed.ok()) return parsed.status();
  env.local_rank = *parsed;
  // Informational (CpuOversubscription()'s advice): unset or not a number
  // in local_rank+1..world_size is unknown, never an error.
  if (const std::optional<std::string> local_size = lookup(spec.local_size)) {
    int n = 0;
    if (absl::SimpleAtoi(*local_size, &n) && n > env.local_rank &&
        n <= env.world_size) {
      env.local_world_size = n;
    }
  }
  if (env.rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch environment: ", spec.rank, "='", *rank,
                     "' must be below ", spec.size, "='", *size, "'"));
  }
  if (env.local_rank >= env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch environment: ", local_name, "='", *local,
                     "' must be below ", spec.size, "='", *size, "'"));
  }
  return std::optional<LaunchEnvironment>(env);
}

std::string Describe(const LauncherSpec& spec, const LaunchEnvironment& env) {
  return absl::StrCat(spec.rank, "=", env.rank, " ", spec.size, "=",
                      env.world_size, " (", spec.name, ")");
}

}  // namespace

absl::StatusOr<LaunchEnvironment> LaunchEnvironment::FromLookup(
    const Lookup& lookup) {
  std::optional<LaunchEnvironment> chosen;
  const LauncherSpec* chosen_spec = nullptr;
  for (const LauncherSpec& spec : ProcessLaunchers()) {
    absl::StatusOr<std::optional<LaunchEnvironment>> env = Read(spec, lookup);
    if (!env.ok()) return env.status();
    if (!*env) continue;
    if (!chosen) {
      chosen = **env;
      chosen_spec = &spec;
    } else if (chosen->rank != (*env)->rank ||
               chosen->world_size != (*env)->world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("launch environment: conflicting launchers: ",
                       Describe(*chosen_spec, *chosen), " but ",
                       Describe(spec, **env), "; unset the stale ones"));
    }
  }
  if (chosen) return *chosen;
  // Slurm counts only without a process launcher (Note [which launcher wins]).
  absl::StatusOr<std::optional<LaunchEnvironment>> slurm =
      Read(Slurm(), lookup);
  if (!slurm.ok()) return slurm.status();
  if (*slurm) return **slurm;
  return LaunchEnvironment();
}

absl::StatusOr<LaunchEnvironment> LaunchEnvironment::FromProcess() {
  return FromLookup([](absl::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

absl::StatusOr<LaunchEnvironment> LaunchEnvironment::FromVariables(
    const std::map<std::string, std::string>& variables) {
  return FromLookup(
      [&variables](absl::string_view name) -> std::optional<std::string> {
        auto it = variables.find(std::string(name));
        if (it == variables.end()) return std::nullopt;
        return it->second;
      });
}

absl::StatusOr<Device> LaunchEnvironment::LocalDevice() const {
  absl::StatusOr<int> index = GpuIndexAmong(Device::CudaDeviceCount());
  if (!index.ok()) return index.status();
  if (*index < 0) return Device::Host();
  return Device::Cuda(*index);
}

absl::StatusOr<int> LaunchEnvironment::GpuIndexAmong(int gpus) const {
  if (gpus <= 0) return -1;
  if (gpus == 1) return 0;
  if (local_rank < gpus) return local_rank;
  return absl::FailedPreconditionError(
      absl::StrCat("launch environment: local rank ", local_rank, " (",
                   launcher, ") has no GPU of its own: this node shows ", gpus,
                   " GPUs; start at most ", gpus,
                   " ranks per node, or give each rank one "
                   "GPU with CUDA_VISIBLE_DEVICES"));
}

std::string LaunchEnvironment::ToString() const {
  return absl::StrCat("rank ", rank, " of ", world_size, " (local rank ",
                      local_rank, ", ", launcher, ")");
}

}  // namespace pinwheel
