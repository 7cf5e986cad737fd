// --epochs_check: pinned, device and resident memory over many epochs:
// WorkloadRunner::RunMemoryCheck.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

#include "loader/dataset.h"
#include "pinning/base/status_macros.h"
#include "samples/bench/report.h"
#include "samples/bench/workload_runner.h"
#include "samples/bench/workloads.h"
#include "transfer/sample_layout.h"

namespace pinwheel::bench {

absl::Status WorkloadRunner::RunMemoryCheck() {
  const Sizes& s = config_.sizes;
  const int epochs = config_.epochs_check;
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<const Dataset> dataset,
      MakeImageDataset(
          {.samples = s.check_samples, .side = s.image_side, .seed = 2}));
  PINWHEEL_ASSIGN_OR_RETURN(
      MemoryCheck check,
      InRow(RunEpochsCheck(dataset,
                           {.device = config_.device,
                            .batch_size = s.check_batch,
                            .seed = config_.seed,
                            .workers = s.check_workers,
                            .prefetch = s.check_prefetch,
                            .device_buffers = config_.device_buffers,
                            .timeout = config_.timeout,
                            .consumer_stream = consumer_native()},
                           epochs),
            "memory check"));
  constexpr double kMB = 1e6;
  absl::PrintF(
      "\nmemory over %d epochs (%d samples of %s, batch %d, %d workers, "
      "prefetch %d; %d batches in %.2f s):\n"
      "  pinned bytes  after batch 1: %d   after the last epoch: %d\n"
      "  device bytes  after batch 1: %d   after the last epoch: %d\n"
      "  RSS           after batch 1: %.1f MB   after the last epoch: %.1f MB "
      "(%+.2f MB)\n"
      "  %s\n",
      check.epochs, s.check_samples, dataset->layout().ToString(),
      s.check_batch, s.check_workers, s.check_prefetch, check.batches,
      check.wall_seconds, check.pinned_bytes_first, check.pinned_bytes_last,
      check.device_bytes_first, check.device_bytes_last, check.rss_first / kMB,
      check.rss_last / kMB,
      (static_cast<double>(check.rss_last) -
       static_cast<double>(check.rss_first)) /
          kMB,
      check.constant() ? "pinned and device bytes constant"
                       : "PINNED OR DEVICE BYTES CHANGED");
  auto integer = [](size_t v) { return absl::StrCat(v); };
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject({
      {"kind", JsonString("memory")},
      {"epochs", absl::StrCat(check.epochs)},
      {"batches", absl::StrCat(check.batches)},
      {"wall_s", JsonNumber(check.wall_seconds)},
      {"pinned_bytes_first", integer(check.pinned_bytes_first)},
      {"pinned_bytes_last", integer(check.pinned_bytes_last)},
      {"device_bytes_first", integer(check.device_bytes_first)},
      {"device_bytes_last", integer(check.device_bytes_last)},
      {"rss_first", integer(check.rss_first)},
      {"rss_last", integer(check.rss_last)},
      {"constant", check.constant() ? "true" : "false"},
  })));
  if (!check.constant()) {
    return absl::InternalError(
        "pinned or device bytes changed between the first batch and the last "
        "epoch (see above)");
  }
  return absl::OkStatus();
}

}  // namespace pinwheel::bench
