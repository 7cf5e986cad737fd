// The clairvoyant cache (loader/storage/cache/) as the extension module binds
// it: pinwheel.TarShards(..., cache_bytes=...) opens one, reads its shards
// through it, and lets the loader plan its reads (PlannedTarShards).
#ifndef PINWHEEL_SAMPLES_PYTHON_EXT_PY_CACHE_H_
#define PINWHEEL_SAMPLES_PYTHON_EXT_PY_CACHE_H_

#include <memory>
#include <nanobind/nanobind.h>
#include <string>

#include "loader/image/tar_shards.h"
#include "loader/iterable_dataset.h"
#include "loader/storage/cache/cached_store.h"
#include "samples/python/ext/py_support.h"

namespace pinwheel::python {

// What pinwheel.TarShards keeps of its cache. Thread-safe (the cache is).
struct CacheHandle {
  std::shared_ptr<CachedStore> cache;
  std::string description;
};

// Returns `dataset`, opened with options.store = cache->cache, as the
// dataset the loader reads: planned when `cache` is not null, else itself.
// Throws StatusError (PlannedTarShards::Create's).
std::shared_ptr<const IterableDataset> WithCachePlan(
    std::shared_ptr<TarShardDataset> dataset, const CacheHandle* cache);

// Adds _Cache, open_cache, open_cached_record_file and cache_stats to `m`.
void BindCache(nb::module_& m);

}  // namespace pinwheel::python

#endif  // PINWHEEL_SAMPLES_PYTHON_EXT_PY_CACHE_H_
