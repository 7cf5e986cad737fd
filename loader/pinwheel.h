// pinwheel: what an embedder uses, in one include: datasets (the interfaces
// and the shipped ones), the loader and its builder, options and
// checkpoints, the launch environment, the device, its streams and events,
// the batches a loader delivers, the status macros and the version
// (loader/version.h: PINWHEEL_VERSION).
//
// Example:
//   #include "pinwheel/pinwheel.h"
//   PINWHEEL_ASSIGN_OR_RETURN(pinwheel::Loader loader,
//       pinwheel::LoaderBuilder(dataset).batch_size(256).Build());
//
// Installed as <prefix>/include/pinwheel/pinwheel.h, so a consumer with only
// <prefix>/include on its include path writes
//   #include "pinwheel/pinwheel.h"
// In the source tree this file is loader/pinwheel.h, and the build tree
// offers it as "pinwheel/pinwheel.h" too (see the top-level CMakeLists.txt).
// The middle layer (the pinned ring, the fenced free list, the device buffer
// pool, the transfer stage), for people who build a pipeline of their own,
// is installed as single headers and not included here:
// "pinwheel/pinning/pinned_ring.h", "pinwheel/transfer/transfer_stage.h",
// ... Thread-safety: see each header.
//
// Compatibility: until 0.3.0 this header also includes what it included
// before 0.2.0 and then dropped (crc32c.h, host_memory_limits.h,
// numa_placement.h, sampler.h), so code that relied on it compiles
// unchanged; include those headers yourself to be ready for 0.3.0 (see
// CHANGELOG.md, which lists every breaking change and its migration).
#ifndef PINWHEEL_PINWHEEL_H_
#define PINWHEEL_PINWHEEL_H_

#include "loader/atomic_file.h"
#include "loader/dataset.h"
#include "loader/image/compressed_image.h"
#include "loader/image/image_folder_dataset.h"
#include "loader/image/image_pipeline.h"
#include "loader/image/image_transforms.h"
#include "loader/image/jpeg.h"
#include "loader/image/tar_shards.h"
#include "loader/in_memory_dataset.h"
#include "loader/index_sampler.h"
#include "loader/iterable_dataset.h"
#include "loader/launch_environment.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/loader_checkpoint.h"
#include "loader/loader_options.h"
#include "loader/loader_stats.h"
#include "loader/mixture_dataset.h"
#include "loader/packed_token_dataset.h"
#include "loader/record_file.h"
#include "loader/sample_random.h"
#include "loader/storage/object_store.h"
#include "loader/storage/open_object_store.h"
#include "loader/storage/shard_pattern.h"
#include "loader/storage/store_options.h"
#include "loader/token_window_dataset.h"
#include "loader/version.h"
#include "loader/weighted_sampler.h"
#include "pinning/base/status_macros.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/device_transform.h"
#include "transfer/event.h"
#include "transfer/normalize_image.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"
#include "transfer/widen_tokens.h"

// Compatibility until 0.3.0 (see the file comment): dropped in 0.2.0.
#include "loader/numa_placement.h"
#include "loader/sampler.h"
#include "pinning/base/crc32c.h"
#include "pinning/host_memory_limits.h"

#endif  // PINWHEEL_PINWHEEL_H_
