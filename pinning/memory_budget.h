// Deprecated: pinning/memory_budget.h was split in pinwheel 0.2.0. The host
// memory limits (MemoryLimits, MemoryLimitSources, ReadMemoryLimits) are in
// pinning/host_memory_limits.h, which this header includes, and is removed
// in 0.3.0. HostMemoryPlan and AdmitHostMemory left the public API: the
// loader admits its own memory (the ring, the host backend's pool, the
// gather's registered bytes) in LoaderBuilder::Build(), which fails with
// ResourceExhausted naming the sizes and the limit. To check a budget of
// your own, compare your sizes with ReadMemoryLimits(). See CHANGELOG.md.
#ifndef PINWHEEL_PINNING_MEMORY_BUDGET_H_
#define PINWHEEL_PINNING_MEMORY_BUDGET_H_

#include "pinning/host_memory_limits.h"

#endif  // PINWHEEL_PINNING_MEMORY_BUDGET_H_
