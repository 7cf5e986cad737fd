#include "loader/pipeline/loader_path.h"

#include <utility>

#include "absl/strings/str_cat.h"

#include "loader/pipeline/map_style_source.h"
#include "loader/pipeline/shard_source.h"
#include "pinning/base/status_macros.h"
#include "transfer/device_stage/copy_writer.h"
#include "transfer/device_stage/transform_writer.h"

namespace pinwheel::internal {
namespace {

// Returns the writer of the worker path: a copy, and the device transform
// after it when one is set.
absl::StatusOr<std::shared_ptr<BatchWriter>> WorkerWriter(
    const LoaderOptions& options, const BatchLayout& layout) {
  const std::shared_ptr<const DeviceTransform>& transform =
      options.device_transform;
  if (!transform) return std::make_shared<CopyWriter>(layout);
  absl::StatusOr<std::shared_ptr<TransformWriter>> writer =
      TransformWriter::Create(
          layout, transform,
          {.skip = options.on_error == ErrorPolicy::kSkipSample,
           .pad = options.pad_last_batch});
  if (!writer.ok()) {
    return absl::Status(
        writer.status().code(),
        absl::StrCat("LoaderBuilder: option 'device_transform': ",
                     writer.status().message()));
  }
  return std::shared_ptr<BatchWriter>(*std::move(writer));
}

}  // namespace

absl::StatusOr<size_t> WorkerPathBufferBytes(const LoaderOptions& options,
                                             const BatchLayout& layout) {
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<BatchWriter> writer,
                            WorkerWriter(options, layout));
  return writer->buffer_bytes();
}

absl::StatusOr<LoaderPath> MakeWorkerPath(
    const LoaderOptions& options, const BatchLayout& layout,
    std::shared_ptr<const Dataset> dataset,
    std::shared_ptr<const IterableDataset> iterable,
    const LoaderCheckpoint* resume) {
  LoaderPath path;
  if (dataset != nullptr) {
    PINWHEEL_ASSIGN_OR_RETURN(
        path.source,
        MapStyleSource::Create(std::move(dataset), options, resume));
  } else {
    path.source =
        std::make_unique<ShardSource>(std::move(iterable), options, resume);
  }
  // The device stage's validation, before anything is allocated.
  PINWHEEL_ASSIGN_OR_RETURN(path.writer, WorkerWriter(options, layout));
  path.fill_layout = layout;
  path.workers = options.num_workers;
  return path;
}

}  // namespace pinwheel::internal
