// w4 (decode-bound images, Note [w4] in bench_main.cc):
// WorkloadRunner::RunImageFolder.
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
#include "loader/image/image_folder_dataset.h"
#include "pinning/base/status_macros.h"
#include "samples/bench/nvtx_range.h"
#include "samples/bench/report.h"
#include "samples/bench/workload_runner.h"
#include "samples/bench/workloads.h"
#include "transfer/normalize_image.h"
#include "transfer/sample_layout.h"

namespace pinwheel::bench {

absl::Status WorkloadRunner::RunImageFolder() {
  const Sizes& s = config_.sizes;
  const std::string& root = config_.w4_root;
  const std::string make = absl::StrFormat(
      "make it with samples/bench's make_images: make_images --out=%s "
      "--count=10000 --classes=100",
      root.empty() ? "/data/w4" : root);
  if (root.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("w4 needs --w4_root, an ImageFolder of JPEGs; ", make));
  }
  absl::StatusOr<std::shared_ptr<ImageFolderDataset>> folder;
  {
    NvtxRange range("w4 open image folder");
    folder =
        ImageFolderDataset::Open(root, {{.train = true, .size = s.w4_size}});
  }
  if (!folder.ok()) {
    return absl::Status(folder.status().code(),
                        absl::StrCat("w4: --w4_root=", root, ": ",
                                     folder.status().message(), "; ", make));
  }
  if ((*folder)->size() < s.w4_batch) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "w4: --w4_root=%s holds %d images, fewer than a batch (%d)", root,
        (*folder)->size(), s.w4_batch));
  }
  // ImageNet's mean and std in 0..255 units: torchvision's Normalize.
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<NormalizeImage> normalize,
      NormalizeImage::Create({.field = "image",
                              .input_layout = ImageLayout::kHWC,
                              .output_dtype = DType::kBFloat16,
                              .mean = {123.675f, 116.28f, 103.53f},
                              .std = {58.395f, 57.12f, 57.375f}}));
  std::shared_ptr<const Dataset> dataset = *folder;
  PINWHEEL_ASSIGN_OR_RETURN(BatchLayout layout,
                            BatchLayout::Create(dataset->layout(), s.w4_batch));
  const std::string title = absl::StrFormat(
      "w4 decode-bound images: %d x RandomResizedCrop(%d) + flip from %d "
      "JPEGs in %s (%d classes), normalised to bf16 CHW on the device stage; "
      "%d timed batches a row after %d warm-up",
      s.w4_batch, s.w4_size, dataset->size(), root, (*folder)->classes().size(),
      s.w4_batches, s.warmup);
  absl::PrintF("\n%s\n", title);
  PINWHEEL_RETURN_IF_ERROR(json_.Write(JsonObject(
      {{"kind", JsonString("workload")},
       {"workload", JsonString("w4")},
       {"batch_size", absl::StrCat(s.w4_batch)},
       {"bytes_per_batch", absl::StrCat(layout.CopyBytes(s.w4_batch))},
       {"samples", absl::StrCat(dataset->size())},
       {"root", JsonString(root)},
       {"size", absl::StrCat(s.w4_size)},
       {"layout", JsonString(dataset->layout().ToString())}})));
  PINWHEEL_RETURN_IF_ERROR(
      RunRows("w4", title, dataset, s.w4_batch, s.w4_batches,
              {.device_transform = normalize, .baselines = false}));

  // Images, cores and images per core of each pinwheel row: the figures
  // the issue compares with torchvision's DataLoader.
  const WorkloadSummary& summary = summaries_.back();
  absl::PrintF(
      "\nw4 images (%d repetitions a row; median [min-max]; cores = process "
      "CPU time / wall time, every thread)\n",
      config_.repeat);
  absl::PrintF("  %-16s %22s %7s %12s\n", "row", "img/s", "cores",
               "img/s/core");
  for (const RepeatedRow& row : summary.rows) {
    if (row.skipped() || row.config().method != "pinwheel") continue;
    std::vector<double> rates, cores, per_core;
    for (const Row& rep : row.reps) {
      const double rate = rep.batches_per_second() * s.w4_batch;
      rates.push_back(rate);
      cores.push_back(rep.cpu_cores());
      per_core.push_back(rep.cpu_cores() > 0 ? rate / rep.cpu_cores() : 0);
    }
    const Spread rate = SpreadOf(rates);
    const Spread core = SpreadOf(cores);
    const Spread each = SpreadOf(per_core);
    absl::PrintF("  pinwheel %-7s %8.0f [%5.0f-%5.0f] %7.1f %12.0f\n",
                 absl::StrFormat("%dw", row.config().workers), rate.median,
                 rate.min, rate.max, core.median, each.median);
    PINWHEEL_RETURN_IF_ERROR(json_.Write(
        JsonObject({{"kind", JsonString("w4_row")},
                    {"workload", JsonString("w4")},
                    {"method", JsonString("pinwheel")},
                    {"workers", absl::StrCat(row.config().workers)},
                    {"prefetch", absl::StrCat(row.config().prefetch)},
                    {"img_per_s", JsonNumber(rate.median)},
                    {"img_per_s_min", JsonNumber(rate.min)},
                    {"img_per_s_max", JsonNumber(rate.max)},
                    {"cores", JsonNumber(core.median)},
                    {"img_per_s_per_core", JsonNumber(each.median)},
                    {"repetitions", absl::StrCat(rate.n)}})));
  }
  return absl::OkStatus();
}

}  // namespace pinwheel::bench
