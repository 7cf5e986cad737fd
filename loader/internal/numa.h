// The oneTBB side of NUMA placement (loader/numa_placement.h): the worker
// arena constrained to the placement's node, and running the pinned ring's
// allocation on that node so its pages are first touched there.
#ifndef PINWHEEL_LOADER_INTERNAL_NUMA_H_
#define PINWHEEL_LOADER_INTERNAL_NUMA_H_

#include <functional>
#include <memory>

#include "oneapi/tbb/task_arena.h"

#include "loader/numa_placement.h"

// oneTBB loads libtbbbind with RTLD_DEEPBIND, which ASan and TSan refuse
// (they abort the process): sanitizer builds never bind.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define PINWHEEL_NUMA_BINDING_DISABLED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define PINWHEEL_NUMA_BINDING_DISABLED 1
#endif
#endif

namespace pinwheel::internal {

// Returns an arena of `workers` threads (one slot reserved for the calling
// thread), bound to placement.node when it is >= 0.
std::unique_ptr<tbb::task_arena> MakeWorkerArena(const NumaPlacement& placement,
                                                 int workers);

// Runs `fn` on a thread bound to placement.node (memory it first touches is
// allocated there under Linux's default policy); on the calling thread
// when the placement binds nothing.
void RunOnNumaNode(const NumaPlacement& placement,
                   const std::function<void()>& fn);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_NUMA_H_
