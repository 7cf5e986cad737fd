// w1 (images) and w3 (w1 with two GEMMs a step): WorkloadRunner::RunImages.
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
#include "samples/bench/cuda_rows.h"
#include "samples/bench/report.h"
#include "samples/bench/workload_runner.h"
#include "samples/bench/workloads.h"
#include "transfer/sample_layout.h"

namespace pinwheel::bench {

absl::Status WorkloadRunner::RunImages(bool with_compute) {
  const Sizes& s = config_.sizes;
  const std::string workload = with_compute ? "w3" : "w1";
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> dataset,
                            Images(/*streaming_stores=*/false));
  PINWHEEL_ASSIGN_OR_RETURN(
      BatchLayout layout,
      BatchLayout::Create(dataset->layout(), s.image_batch));
  const double mb = static_cast<double>(layout.CopyBytes(s.image_batch)) / 1e6;
  const std::string title = absl::StrFormat(
      "%s %s: %d x (%s) = %.2f MB a batch, %d in-memory samples, shuffled; "
      "%d timed batches a row (naive %d) after %d warm-up",
      workload, with_compute ? "overlap (images + 2 GEMMs a step)" : "images",
      s.image_batch, dataset->layout().ToString(), mb, s.image_samples,
      s.batches, s.naive_batches, s.warmup);
  absl::PrintF("\n%s\n", title);
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject(
      {{"kind", JsonString("workload")},
       {"workload", JsonString(workload)},
       {"batch_size", absl::StrCat(s.image_batch)},
       {"bytes_per_batch", absl::StrCat(layout.CopyBytes(s.image_batch))},
       {"samples", absl::StrCat(s.image_samples)},
       {"layout", JsonString(dataset->layout().ToString())},
       {"gemm_n", absl::StrCat(with_compute ? s.gemm_n : 0)}})));

  if (!with_compute) {
    return RunRows(workload, title, dataset, s.image_batch, s.batches, {});
  }
  if (!cuda()) {
    constexpr absl::string_view kNeedsCuda =
        "skipped: w3 needs a CUDA device and cuBLAS (host backend)";
    WorkloadSummary summary{.workload = workload, .title = title};
    PrintSummaryHeader(absl::StrCat(workload, " summary"));
    for (const char* method : {"compute_alone", "naive", "pinwheel"}) {
      Row row{.workload = workload,
              .method = method,
              .skipped = true,
              .note = std::string(kNeedsCuda)};
      RepeatedRow repeated{.reps = {row}};
      PrintSummaryRow(repeated);
      PINWHEEL_RETURN_IF_ERROR(json_.Write(RepeatedRowToJson(repeated)));
      summary.rows.push_back(std::move(repeated));
    }
    summaries_.push_back(std::move(summary));
    return absl::OkStatus();
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<GemmStep> step,
      GemmStep::Create(config_.device.ordinal(), s.gemm_n));
  return RunRows(workload, title, dataset, s.image_batch, s.batches,
                 {.step = step.get(), .compute = step.get()});
}

}  // namespace pinwheel::bench
