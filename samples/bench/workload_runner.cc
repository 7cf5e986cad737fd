#include "samples/bench/workload_runner.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/dataset.h"
#include "pinning/base/status_macros.h"
#include "samples/bench/cuda_rows.h"
#include "samples/bench/nvtx_range.h"
#include "samples/bench/report.h"
#include "samples/bench/thread_pinning.h"
#include "samples/bench/workloads.h"
#include "transfer/device.h"
#include "transfer/sample_layout.h"

namespace pinwheel::bench {

absl::StatusOr<std::shared_ptr<const Dataset>> WorkloadRunner::Images(
    bool streaming_stores) {
  std::shared_ptr<const Dataset>& images = images_[streaming_stores ? 1 : 0];
  if (images == nullptr) {
    const Sizes& s = config_.sizes;
    PINWHEEL_ASSIGN_OR_RETURN(
        images, MakeImageDataset({.samples = s.image_samples,
                                  .side = s.image_side,
                                  .seed = 1,
                                  .streaming_stores = streaming_stores}));
  }
  return images;
}

absl::StatusOr<Measurement> WorkloadRunner::MeasureRow(
    const RowSpec& spec, std::shared_ptr<const Dataset> dataset,
    const BatchLayout& layout, int64_t batch_size, const WorkloadSteps& steps) {
  ConsumerStep* const step = steps.step;
  const Sizes& s = config_.sizes;
  const int ordinal = config_.device.ordinal();
  const size_t bytes = layout.CopyBytes(batch_size);
  const std::string name =
      absl::StrCat(spec.proto.workload, " ", spec.proto.Label());
  NvtxRange range(name);
  if (spec.proto.method == "pageable") {
    return InRow(MeasurePageableCopy(ordinal, bytes, spec.batches, s.warmup),
                 name);
  }
  if (spec.proto.method == "naive") {
    return InRow(MeasureNaiveLoader(*dataset, layout,
                                    {.ordinal = ordinal,
                                     .batches = spec.batches,
                                     .warmup = s.warmup,
                                     .collate_threads = config_.naive_threads,
                                     .seed = config_.seed,
                                     .step = step,
                                     .stream = consumer_native()}),
                 name);
  }
  const PinwheelConfig& c = *spec.pinwheel;
  if (c.streaming_stores) {
    PINWHEEL_ASSIGN_OR_RETURN(dataset, Images(/*streaming_stores=*/true));
  }
  return InRow(
      MeasurePinwheel(dataset,
                      {.device = config_.device,
                       .batch_size = batch_size,
                       .seed = config_.seed,
                       .workers = c.workers,
                       .prefetch = c.prefetch,
                       .device_buffers = c.device_buffers,
                       .warmup = c.workers == LoaderOptions::kAuto ||
                                         c.prefetch == LoaderOptions::kAuto
                                     ? s.warmup + s.auto_settle
                                     : s.warmup,
                       .batches = spec.batches,
                       .timeout = config_.timeout,
                       .consumer_stream = consumer_native(),
                       .step = step,
                       .pin_consumer_cpu = config_.pin_consumer_cpu,
                       .gather = c.gather ? GatherMode::kOn : GatherMode::kOff,
                       .device_transform = steps.device_transform}),
      name);
}

absl::Status WorkloadRunner::RunRows(const std::string& workload,
                                     const std::string& title,
                                     std::shared_ptr<const Dataset> dataset,
                                     int64_t batch_size, int batches,
                                     const WorkloadSteps& steps) {
  const Sizes& s = config_.sizes;
  GemmStep* const compute = steps.compute;
  const int repeat = config_.repeat;
  PINWHEEL_ASSIGN_OR_RETURN(BatchLayout layout,
                            BatchLayout::Create(dataset->layout(), batch_size));
  const size_t bytes = layout.CopyBytes(batch_size);
  constexpr absl::string_view kNeedsCuda =
      "skipped: needs a CUDA device (host backend)";

  // The rows, in the order each round measures them.
  std::vector<RowSpec> specs;
  const bool baselines = config_.baselines && steps.baselines;
  if (baselines && compute == nullptr) {
    specs.push_back({.proto = {.workload = workload,
                               .method = "pageable",
                               .note = "cudaMemcpy from malloc'd memory"},
                     .batches = batches});
  }
  if (baselines) {
    specs.push_back(
        {.proto = {.workload = workload,
                   .method = "naive",
                   .workers = config_.naive_threads,
                   .note = "malloc+collate, cudaHostAlloc+memcpy per batch, "
                           "copy+sync"},
         .batches = s.naive_batches});
  }
  for (const PinwheelConfig& c : config_.configs.at(workload)) {
    specs.push_back({.proto = {.workload = workload,
                               .method = "pinwheel",
                               .workers = c.workers,
                               .prefetch = c.prefetch,
                               .device_buffers = c.device_buffers,
                               .stores = c.streaming_stores ? "nt" : "",
                               .gather = c.gather},
                     .pinwheel = c,
                     .batches = batches});
  }

  // The reference: the raw pinned copy, or w3's compute step alone.
  Row reference_proto{
      .workload = workload,
      .method = compute == nullptr ? "raw_pinned" : "compute_alone",
      .note =
          compute == nullptr
              ? "cudaMemcpyAsync from one pinned buffer, event-timed"
              : absl::StrFormat("2 bf16 GEMMs %d^3, event-timed", s.gemm_n)};
  std::unique_ptr<RawPinnedCopier> copier;
  if (cuda() && compute == nullptr) {
    PINWHEEL_ASSIGN_OR_RETURN(
        copier, InRow(RawPinnedCopier::Create(config_.device.ordinal(), bytes),
                      workload + " raw_pinned"));
  }
  // w2w: w2's raw copy too, measured right after the workload's own.
  const Row w2_reference_proto{
      .workload = workload,
      .method = "raw_pinned_w2",
      .note = absl::StrFormat(
          "w2's batch (%d bytes, i64 input+target): the reference of 'vs "
          "w2's raw copy'",
          steps.w2_reference_bytes)};
  std::unique_ptr<RawPinnedCopier> w2_copier;
  if (cuda() && steps.w2_reference_bytes > 0) {
    PINWHEEL_ASSIGN_OR_RETURN(
        w2_copier, InRow(RawPinnedCopier::Create(config_.device.ordinal(),
                                                 steps.w2_reference_bytes),
                         workload + " raw_pinned_w2"));
  }
  const bool has_reference = cuda();
  RepeatedRow reference;
  RepeatedRow w2_reference;
  int reference_count = 0;
  double w2_raw_bps = 0;  // the latest measurement of w2's raw copy
  auto measure_reference = [&]() -> absl::StatusOr<Row> {
    Row row = reference_proto;
    row.repetition = ++reference_count;
    if (w2_copier != nullptr) {
      Row w2_row = w2_reference_proto;
      w2_row.repetition = reference_count;
      NvtxRange range(workload + " raw_pinned_w2");
      PINWHEEL_ASSIGN_OR_RETURN(w2_row.measurement,
                                InRow(w2_copier->Measure(batches, s.warmup),
                                      workload + " raw_pinned_w2"));
      w2_row.raw_gbps = w2_row.gbps();
      w2_raw_bps = w2_row.batches_per_second();
      PINWHEEL_RETURN_IF_ERROR(json_.Write(RowToJson(w2_row)));
      w2_reference.reps.push_back(std::move(w2_row));
    }
    if (compute == nullptr) {
      NvtxRange range(workload + " raw_pinned");
      PINWHEEL_ASSIGN_OR_RETURN(
          row.measurement,
          InRow(copier->Measure(batches, s.warmup), workload + " raw_pinned"));
      row.raw_gbps = row.gbps();
    } else {
      NvtxRange range(workload + " compute_alone");
      PINWHEEL_ASSIGN_OR_RETURN(
          row.compute_ms,
          InRow(compute->TimeAloneMs(consumer_native(), batches, s.warmup),
                workload + " compute_alone"));
      row.measurement.batches = batches;
      row.measurement.wall_seconds = row.compute_ms * batches / 1e3;
      row.measurement.device_bytes = row.measurement.device_bytes_first =
          compute->device_bytes();
    }
    PINWHEEL_RETURN_IF_ERROR(json_.Write(RowToJson(row)));
    reference.reps.push_back(row);
    return row;
  };

  std::vector<RepeatedRow> rows(specs.size());
  for (int round = 1; round <= repeat; ++round) {
    std::optional<Row> before;
    double w2_raw_bps_before = 0;
    if (has_reference) {
      PINWHEEL_ASSIGN_OR_RETURN(before, measure_reference());
      w2_raw_bps_before = w2_raw_bps;
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      Row row = specs[i].proto;
      row.repetition = round;
      const bool needs_cuda = row.method != "pinwheel";
      if (needs_cuda && !cuda()) {
        row.skipped = true;
        row.note = std::string(kNeedsCuda);
        rows[i].reps = {row};
        continue;
      }
      PINWHEEL_ASSIGN_OR_RETURN(
          row.measurement,
          MeasureRow(specs[i], dataset, layout, batch_size, steps));
      if (has_reference) {
        PINWHEEL_ASSIGN_OR_RETURN(Row after, measure_reference());
        if (compute == nullptr) {
          row.raw_gbps = (before->gbps() + after.gbps()) / 2;
        } else {
          row.compute_ms = (before->compute_ms + after.compute_ms) / 2;
        }
        // Rows that end with w2's tensors (the step ran): not the pageable
        // copy.
        if (w2_copier != nullptr && row.method != "pageable") {
          row.w2_raw_batches_per_second = (w2_raw_bps_before + w2_raw_bps) / 2;
        }
        w2_raw_bps_before = w2_raw_bps;
        before = std::move(after);
      }
      PrintRepetition(row, repeat);
      PINWHEEL_RETURN_IF_ERROR(json_.Write(RowToJson(row)));
      rows[i].reps.push_back(std::move(row));
    }
  }

  WorkloadSummary summary{
      .workload = workload, .title = title, .bytes_per_batch = bytes};
  if (has_reference) {
    summary.rows.push_back(std::move(reference));
    if (w2_copier != nullptr) summary.rows.push_back(std::move(w2_reference));
  } else {
    Row skipped = reference_proto;
    skipped.skipped = true;
    skipped.note = compute == nullptr ? std::string(kNeedsCuda)
                                      : "skipped: needs a CUDA device";
    summary.rows.push_back(RepeatedRow{.reps = {skipped}});
  }
  for (RepeatedRow& row : rows) summary.rows.push_back(std::move(row));
  PrintSummaryHeader(absl::StrFormat(
      "%s summary over %d repetitions (medians; [min-max])", workload, repeat));
  for (const RepeatedRow& row : summary.rows) {
    PrintSummaryRow(row);
    PINWHEEL_RETURN_IF_ERROR(json_.Write(RepeatedRowToJson(row)));
  }
  summaries_.push_back(std::move(summary));
  return absl::OkStatus();
}

}  // namespace pinwheel::bench
