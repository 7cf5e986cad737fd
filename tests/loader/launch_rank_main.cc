// launch_rank_helper: one rank of a simulated multi-node job, for
// tests/loader/multi_node_test.cc. It reads its rank from the launcher's
// variables in its own environment (LaunchEnvironment::FromProcess()),
// builds a loader with distributed_from_launcher() on the host backend,
// reads batches and writes what it read to a file:
//
//   launch_rank_helper SIZE BATCH BATCHES GPUS OUT [RESUME [CHECKPOINT]]
//
// SIZE samples of PatternDataset, shuffled with seed 11, BATCH a batch;
// BATCHES batches read (-1: to the end of the epoch); GPUS the GPUs the
// node is said to show (the device index is GpuIndexAmong(GPUS)); OUT gets
// "launcher rank world local_rank local_world_size gpu_index" on its first
// line, then one
// dataset index a line; RESUME ("-" for none) a checkpoint file to resume
// from; CHECKPOINT where to write the checkpoint taken after the last batch.
// Exit status 0, or 1 with the error on stderr.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "loader/launch_environment.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/loader_checkpoint.h"
#include "pinning/base/status_macros.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

absl::StatusOr<int64_t> Number(const char* name, const char* text) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " '", text, "' is not a number"));
  }
  return value;
}

absl::Status Run(int argc, char** argv) {
  if (argc < 6 || argc > 8) {
    return absl::InvalidArgumentError(
        "usage: launch_rank_helper SIZE BATCH BATCHES GPUS OUT [RESUME "
        "[CHECKPOINT]]");
  }
  PINWHEEL_ASSIGN_OR_RETURN(const int64_t size, Number("SIZE", argv[1]));
  PINWHEEL_ASSIGN_OR_RETURN(const int64_t batch, Number("BATCH", argv[2]));
  PINWHEEL_ASSIGN_OR_RETURN(const int64_t batches, Number("BATCHES", argv[3]));
  PINWHEEL_ASSIGN_OR_RETURN(const int64_t gpus, Number("GPUS", argv[4]));
  const std::string out_path = argv[5];
  const std::string resume_path = argc > 6 ? argv[6] : "-";
  const std::string checkpoint_path = argc > 7 ? argv[7] : "";

  PINWHEEL_ASSIGN_OR_RETURN(const LaunchEnvironment env,
                            LaunchEnvironment::FromProcess());
  PINWHEEL_ASSIGN_OR_RETURN(const int gpu,
                            env.GpuIndexAmong(static_cast<int>(gpus)));

  LoaderBuilder builder(
      std::make_shared<testing_support::PatternDataset>(size));
  builder.batch_size(batch)
      .shuffle(/*seed=*/11)
      .num_workers(1)
      .device(Device::Host())
      .distributed_from_launcher();
  if (resume_path != "-") {
    std::ifstream in(resume_path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    PINWHEEL_ASSIGN_OR_RETURN(LoaderCheckpoint checkpoint,
                              LoaderCheckpoint::FromBytes(bytes));
    builder.resume(std::move(checkpoint));
  }
  PINWHEEL_ASSIGN_OR_RETURN(Loader loader, builder.Build());
  const int b = loader.layout().sample().FieldIndex("b");

  std::ostringstream out;
  out << env.launcher << " " << env.rank << " " << env.world_size << " "
      << env.local_rank << " " << env.local_world_size << " " << gpu << "\n";
  for (int64_t read = 0; batches < 0 || read < batches; ++read) {
    PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> next, loader.Next());
    if (!next) break;
    PINWHEEL_RETURN_IF_ERROR(next->WaitOnHost());
    const auto* values = next->field(b).data_as<const int64_t>();
    for (int64_t i = 0; i < next->size(); ++i) {
      out << (values[i] - 1) / 7 << "\n";  // b = index * 7 + 1
    }
    PINWHEEL_RETURN_IF_ERROR(next->Release());
  }
  if (!checkpoint_path.empty()) {
    PINWHEEL_ASSIGN_OR_RETURN(const LoaderCheckpoint checkpoint,
                              loader.Checkpoint());
    std::ofstream(checkpoint_path, std::ios::binary) << checkpoint.ToBytes();
  }
  std::ofstream file(out_path);
  file << out.str();
  if (!file.flush()) {
    return absl::InternalError(absl::StrCat("cannot write ", out_path));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace pinwheel

int main(int argc, char** argv) {
  const absl::Status status = pinwheel::Run(argc, argv);
  if (!status.ok()) {
    std::fprintf(stderr, "launch_rank_helper: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
