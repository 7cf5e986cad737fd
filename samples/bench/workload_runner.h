// WorkloadRunner: runs pinwheel_bench's workloads, each a table of rows
// measured in interleaved repetitions (Note [repetitions] in bench_main.cc).
// Run<Workload>() is defined in the workload's own file:
//   workload_runner.cc        the rows' machinery (RunRows, MeasureRow)
//   workload_images.cc        w1 and w3 (RunImages)
//   workload_tokens.cc        w2, w2w (RunTokens) and w2p (RunPacked)
//   workload_image_folder.cc  w4 (RunImageFolder)
//   workload_memory_check.cc  --epochs_check (RunMemoryCheck)
// Not thread-safe.
#ifndef PINWHEEL_SAMPLES_BENCH_WORKLOAD_RUNNER_H_
#define PINWHEEL_SAMPLES_BENCH_WORKLOAD_RUNNER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "samples/bench/bench_config.h"
#include "samples/bench/cuda_rows.h"
#include "samples/bench/report.h"
#include "samples/bench/workloads.h"
#include "transfer/device_transform.h"
#include "transfer/sample_layout.h"

namespace pinwheel::bench {

// One row of a workload, before it is measured: what to run.
struct RowSpec {
  Row proto;  // workload, method, configuration, note
  std::optional<PinwheelConfig> pinwheel;
  int batches = 0;  // timed batches
};

// A workload's summary table, kept for the end of the run and --quick.
struct WorkloadSummary {
  std::string workload;
  std::string title;
  size_t bytes_per_batch = 0;
  std::vector<RepeatedRow> rows;  // the reference first
};

// What a workload's consumer does after each batch and what its rows are
// compared with.
struct WorkloadSteps {
  // Queued on the consumer stream after each batch (w3: the GEMMs; w2w: the
  // widening); null: nothing.
  ConsumerStep* step = nullptr;
  // w3: the reference is this compute step alone instead of the raw copy.
  GemmStep* compute = nullptr;
  // w2w: also measure the raw pinned copy of this many bytes (w2's batch)
  // next to every row; 0: no.
  size_t w2_reference_bytes = 0;
  // w4: the device stage of the pinwheel rows; null: none.
  std::shared_ptr<const DeviceTransform> device_transform;
  // false: no pageable / naive rows whatever --baselines says (w4).
  bool baselines = true;
};

// Runs the rows of one workload, printing and recording each as it ends.
class WorkloadRunner {
 public:
  WorkloadRunner(const Config& config, JsonLinesWriter& json,
                 ConsumerStream* consumer)
      : config_(config), json_(json), consumer_(consumer) {}

  absl::Status RunImages(bool with_compute);
  // w2, or w2w with `windows`.
  absl::Status RunTokens(bool windows);
  // w2p: w2's tokens packed from documents.
  absl::Status RunPacked();
  // w4: decode-bound images from --w4_root (Note [w4]).
  absl::Status RunImageFolder();
  absl::Status RunMemoryCheck();

  const std::vector<WorkloadSummary>& summaries() const { return summaries_; }

 private:
  bool cuda() const { return config_.device.is_cuda(); }
  void* consumer_native() const {
    return consumer_ != nullptr ? consumer_->native() : nullptr;
  }

  absl::StatusOr<std::shared_ptr<const Dataset>> Images(bool streaming_stores);

  // Runs every row of a workload --repeat times in interleaved rounds (see
  // Note [repetitions]): the pageable copy and the naive loader (with
  // --baselines), then pinwheel at every configuration of the workload.
  // `steps.compute` (w3) makes the compute alone the reference instead of
  // the raw copy.
  absl::Status RunRows(const std::string& workload, const std::string& title,
                       std::shared_ptr<const Dataset> dataset,
                       int64_t batch_size, int batches,
                       const WorkloadSteps& steps);

  absl::StatusOr<Measurement> MeasureRow(const RowSpec& spec,
                                         std::shared_ptr<const Dataset> dataset,
                                         const BatchLayout& layout,
                                         int64_t batch_size,
                                         const WorkloadSteps& steps);

  const Config& config_;
  JsonLinesWriter& json_;
  ConsumerStream* consumer_;  // null on the host backend
  // w1 and w3 share them: memcpy and streaming stores.
  std::shared_ptr<const Dataset> images_[2];
  std::vector<WorkloadSummary> summaries_;
};

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_WORKLOAD_RUNNER_H_
