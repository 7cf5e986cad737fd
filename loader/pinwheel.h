// pinwheel: the whole public API in one include.
//
// Installed as <prefix>/include/pinwheel/pinwheel.h, so a consumer with only
// <prefix>/include on its include path writes
//   #include "pinwheel/pinwheel.h"
// (or includes single headers: "pinwheel/loader/loader.h",
// "pinwheel/transfer/device_batch.h", ...). In the source tree this file is
// loader/pinwheel.h, and the build tree offers it as "pinwheel/pinwheel.h"
// too (see the top-level CMakeLists.txt). Thread-safety: see each header.
#ifndef PINWHEEL_PINWHEEL_H_
#define PINWHEEL_PINWHEEL_H_

#include "loader/atomic_file.h"
#include "loader/dataset.h"
#include "loader/in_memory_dataset.h"
#include "loader/iterable_dataset.h"
#include "loader/launch_environment.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/loader_checkpoint.h"
#include "loader/loader_options.h"
#include "loader/numa_placement.h"
#include "loader/record_file.h"
#include "loader/sampler.h"
#include "loader/token_window_dataset.h"
#include "pinning/fence.h"
#include "pinning/fenced_free_list.h"
#include "pinning/host_allocation.h"
#include "pinning/pinned_ring.h"
#include "pinning/base/status_macros.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/device_buffer_pool.h"
#include "transfer/event.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"
#include "transfer/transfer_stage.h"

#endif  // PINWHEEL_PINWHEEL_H_
