// Bindings for resuming and launching from Python: checkpoint bytes parsed
// for inspection, the launch environment (loader/launch_environment.h), the
// iterable dataset of Python shards and worker_init (py_iterable.h).
#include <cstdint>
#include <map>
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "loader/launch_environment.h"
#include "loader/loader_checkpoint.h"
#include "pinning/base/coding.h"
#include "samples/python/ext/py_iterable.h"
#include "samples/python/ext/py_support.h"

namespace pinwheel::python {

void BindResume(nb::module_& m) {
  using namespace nb::literals;

  m.def(
      "_checkpoint_info",
      [](nb::bytes bytes) {
        const LoaderCheckpoint c = ValueOrThrow(LoaderCheckpoint::FromBytes(
            absl::string_view(bytes.c_str(), bytes.size())));
        nb::dict d;
        // The bytes' own version (u32 after the 8-byte magic; FromBytes
        // checked that it is there).
        d["version"] = DecodeLittleEndian<uint32_t>(bytes.c_str() + 8);
        d["kind"] = c.kind == LoaderCheckpoint::Kind::kIterable ? "iterable"
                                                                : "map-style";
        d["dataset_size"] = c.dataset_size;
        d["shuffle"] = c.shuffle;
        d["custom_order"] = c.custom_order;
        d["seed"] = c.seed;
        d["batch_size"] = c.batch_size;
        d["drop_last"] = c.drop_last;
        d["drop_uneven_tail"] = c.drop_uneven_tail;
        d["world_size"] = c.world_size;
        d["rank"] = c.rank;
        d["epoch"] = c.epoch;
        d["position"] = c.position;
        d["num_shards"] = c.num_shards;
        d["next_shard"] = c.next_shard;
        return d;
      },
      "bytes"_a,
      "Parses LoaderCheckpoint bytes (DataLossError when truncated or "
      "corrupted, InvalidArgumentError for foreign bytes or a newer "
      "version) and returns its fields as a dict.");

  nb::class_<LaunchEnvironment>(
      m, "LaunchEnvironment",
      "This process's rank, world size and local rank as the job launcher "
      "(torchrun, Open MPI, MPICH/PMI, Slurm) set them; see "
      "pinwheel.launch_environment().")
      .def_ro("launcher", &LaunchEnvironment::launcher,
              "\"torchrun\", \"openmpi\", \"pmi\", \"slurm\" or \"none\".")
      .def_ro("rank", &LaunchEnvironment::rank)
      .def_ro("world_size", &LaunchEnvironment::world_size)
      .def_ro("local_rank", &LaunchEnvironment::local_rank,
              "This rank's index among the ranks on its node.")
      .def(
          "local_device",
          [](const LaunchEnvironment& env) {
            return ValueOrThrow(env.LocalDevice()).ToString();
          },
          "The device this rank uses: \"cuda:<local_rank>\" when the machine "
          "has more GPUs than local_rank, \"cuda:0\" when it shows one, "
          "\"host\" without any; FailedPreconditionError otherwise.")
      .def("__repr__", [](const LaunchEnvironment& env) {
        return absl::StrCat("<pinwheel.LaunchEnvironment ", env.ToString(),
                            ">");
      });

  m.def(
      "launch_environment",
      [](std::optional<std::map<std::string, std::string>> variables) {
        return ValueOrThrow(variables.has_value()
                                ? LaunchEnvironment::FromVariables(*variables)
                                : LaunchEnvironment::FromProcess());
      },
      "variables"_a = nb::none(),
      "Returns the LaunchEnvironment read from this process's environment "
      "(or from `variables`, a dict standing in for it). Raises "
      "InvalidArgumentError naming the variable and its value when one is "
      "not a number in range, a launcher's set is incomplete, rank >= world "
      "size, or two launchers disagree. Without any launcher: rank 0 of 1.");

  m.def("python_iterable_dataset", &MakePythonIterableDataset, "fields"_a,
        "open_shard"_a,
        "An iterable dataset whose open_shard(shard, num_shards, epoch) "
        "returns a stream with next(sample) -> bool.");
}

}  // namespace pinwheel::python
