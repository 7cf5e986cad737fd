// w2 (tokens), w2w (w2 shipped as windows) and w2p (w2 packed):
// WorkloadRunner::RunTokens and RunPacked.
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
#include "loader/packed_token_dataset.h"
#include "pinning/base/status_macros.h"
#include "samples/bench/cuda_rows.h"
#include "samples/bench/report.h"
#include "samples/bench/workload_runner.h"
#include "samples/bench/workloads.h"
#include "transfer/sample_layout.h"

namespace pinwheel::bench {

absl::Status WorkloadRunner::RunTokens(bool windows) {
  const Sizes& s = config_.sizes;
  const std::string workload = windows ? "w2w" : "w2";
  PINWHEEL_ASSIGN_OR_RETURN(bool written,
                            EnsureTokenFile(config_.token_file, s.tokens));
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<const Dataset> dataset,
      OpenTokenDataset(config_.token_file, s.seq_len, /*seed=*/11, windows));
  PINWHEEL_ASSIGN_OR_RETURN(
      BatchLayout layout,
      BatchLayout::Create(dataset->layout(), s.token_batch));
  const double mb = static_cast<double>(layout.CopyBytes(s.token_batch)) / 1e6;
  // w2w's rows are also compared with w2's batch (the i64 layout).
  WorkloadSteps steps;
  std::unique_ptr<WidenStep> widen;
  std::string consumer = "";
  if (windows) {
    PINWHEEL_ASSIGN_OR_RETURN(
        std::shared_ptr<const Dataset> widened,
        OpenTokenDataset(config_.token_file, s.seq_len, /*seed=*/11));
    PINWHEEL_ASSIGN_OR_RETURN(
        BatchLayout w2_layout,
        BatchLayout::Create(widened->layout(), s.token_batch));
    steps.w2_reference_bytes = w2_layout.CopyBytes(s.token_batch);
    if (cuda()) {
      PINWHEEL_ASSIGN_OR_RETURN(
          widen,
          WidenStep::Create(config_.device.ordinal(), /*token_bytes=*/2,
                            /*signed_tokens=*/false, s.token_batch, s.seq_len));
      steps.step = widen.get();
      consumer = absl::StrFormat(
          "; the consumer widens each batch on its stream into i64 input and "
          "target [%d, %d] (w2's tensors; %.3f MB of device arrays)",
          s.token_batch, s.seq_len,
          static_cast<double>(widen->device_bytes()) / 1e6);
    } else {
      consumer =
          "; host backend: no widening kernel, the rows ship the windows only";
    }
  }
  const std::string title = absl::StrFormat(
      "%s tokens%s: %d x (%s) = %.3f MB a batch, %d windows over %d u16 "
      "tokens in %s%s; %d timed batches a row (naive %d) after %d "
      "warm-up%s",
      workload, windows ? " shipped as windows" : "", s.token_batch,
      dataset->layout().ToString(), mb, dataset->size(), s.tokens,
      config_.token_file, written ? " (written now)" : "", s.w2_batches,
      s.naive_batches, s.warmup, consumer);
  absl::PrintF("\n%s\n", title);
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject(
      {{"kind", JsonString("workload")},
       {"workload", JsonString(workload)},
       {"batch_size", absl::StrCat(s.token_batch)},
       {"bytes_per_batch", absl::StrCat(layout.CopyBytes(s.token_batch))},
       {"samples", absl::StrCat(dataset->size())},
       {"tokens", absl::StrCat(s.tokens)},
       {"layout", JsonString(dataset->layout().ToString())}})));
  return RunRows(workload, title, dataset, s.token_batch, s.w2_batches, steps);
}

absl::Status WorkloadRunner::RunPacked() {
  const Sizes& s = config_.sizes;
  PINWHEEL_ASSIGN_OR_RETURN(bool written,
                            EnsureTokenFile(config_.token_file, s.tokens));
  const std::string offsets = absl::StrCat(config_.token_file, ".docs");
  PINWHEEL_RETURN_IF_ERROR(WriteDocumentOffsets(
      offsets, s.tokens, std::max<int64_t>(1, s.seq_len / 4)));
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<PackedTokenDataset> packed,
      PackedTokenDataset::Open(
          config_.token_file,
          {.token_bytes = 2, .seq_len = s.seq_len, .offsets_path = offsets}));
  std::shared_ptr<const Dataset> dataset = packed;
  PINWHEEL_ASSIGN_OR_RETURN(
      BatchLayout layout,
      BatchLayout::Create(dataset->layout(), s.token_batch));
  const double mb = static_cast<double>(layout.CopyBytes(s.token_batch)) / 1e6;
  const std::string title = absl::StrFormat(
      "w2p packed tokens: %d x (%s) = %.3f MB a batch, %d rows from %d "
      "documents of %d u16 tokens in %s%s; %d timed batches a row (naive "
      "%d) after %d warm-up",
      s.token_batch, dataset->layout().ToString(), mb, dataset->size(),
      packed->documents(), s.tokens, config_.token_file,
      written ? " (written now)" : "", s.w2_batches, s.naive_batches, s.warmup);
  absl::PrintF("\n%s\n", title);
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject(
      {{"kind", JsonString("workload")},
       {"workload", JsonString("w2p")},
       {"batch_size", absl::StrCat(s.token_batch)},
       {"bytes_per_batch", absl::StrCat(layout.CopyBytes(s.token_batch))},
       {"samples", absl::StrCat(dataset->size())},
       {"tokens", absl::StrCat(s.tokens)},
       {"layout", JsonString(dataset->layout().ToString())}})));
  return RunRows("w2p", title, dataset, s.token_batch, s.w2_batches, {});
}

}  // namespace pinwheel::bench
