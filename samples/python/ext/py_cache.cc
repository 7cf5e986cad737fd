#include "samples/python/ext/py_cache.h"

#include <cstdint>
#include <memory>
#include <nanobind/nanobind.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include "loader/record_file.h"
#include "loader/storage/cache/planned_record_file.h"
#include "loader/storage/cache/planned_tar_shards.h"
#include "loader/storage/open_object_store.h"
#include "samples/python/ext/py_datasets.h"

namespace pinwheel::python {
namespace {

using namespace nb::literals;

CacheHandle OpenCache(const std::string& url, int64_t budget_bytes,
                      int64_t block_bytes, const std::string& directory) {
  absl::StatusOr<std::shared_ptr<CachedStore>> cache;
  {
    nb::gil_scoped_release nogil;  // warms from the directory
    absl::StatusOr<std::shared_ptr<ObjectStore>> remote =
        OpenObjectStore(url, {});
    if (remote.ok()) {
      cache =
          CachedStore::Open(*std::move(remote), {.budget_bytes = budget_bytes,
                                                 .block_bytes = block_bytes,
                                                 .directory = directory});
    } else {
      cache = remote.status();
    }
  }
  if (!cache.ok()) throw StatusError(cache.status());
  return {*std::move(cache),
          absl::StrCat("cache of ", budget_bytes, " bytes in ",
                       directory.empty() ? "memory" : directory)};
}

nb::dict Stats(const CacheHandle& handle) {
  const CacheStats s = handle.cache->Stats();
  nb::dict out;
  out["hits"] = s.hits;
  out["misses"] = s.misses;
  out["hit_rate"] = s.hit_rate();
  out["bytes_fetched"] = s.bytes_fetched;
  out["fetches"] = s.fetches;
  out["prefetches"] = s.prefetches;
  out["bytes_fetched_again"] = s.bytes_fetched_again;
  nb::dict by_epoch;
  for (const auto& [epoch, bytes] : s.bytes_fetched_by_epoch) {
    by_epoch[nb::int_(epoch)] = bytes;
  }
  out["bytes_fetched_by_epoch"] = by_epoch;
  out["reader_wait_s"] = absl::ToDoubleSeconds(s.reader_wait);
  out["unplanned_reads"] = s.unplanned_reads;
  out["uncached_reads"] = s.uncached_reads;
  out["skipped_positions"] = s.skipped_positions;
  out["evictions"] = s.evictions;
  out["fetch_errors"] = s.fetch_errors;
  out["peak_bytes"] = s.peak_bytes;
  out["held_bytes"] = handle.cache->held_bytes();
  out["warm_blocks"] = s.warm_blocks;
  out["warm_bytes"] = s.warm_bytes;
  out["dropped_torn"] = s.dropped_torn;
  out["dropped_foreign"] = s.dropped_foreign;
  out["dropped_stale"] = s.dropped_stale;
  out["dropped_over_budget"] = s.dropped_over_budget;
  return out;
}

DatasetHandle OpenCachedRecordFile(const std::string& url,
                                   const CacheHandle& cache) {
  std::shared_ptr<RecordFileDataset> records;
  {
    nb::gil_scoped_release nogil;  // reads the header
    absl::StatusOr<std::shared_ptr<RecordFileDataset>> opened =
        RecordFileDataset::Open(url, {}, cache.cache);
    if (!opened.ok()) {
      nb::gil_scoped_acquire gil;
      throw StatusError(opened.status());
    }
    records = *std::move(opened);
  }
  return {ValueOrThrow(PlannedRecordFile::Create(records, cache.cache)),
          nullptr, absl::StrCat("RecordFile(", url, ", cached)")};
}

}  // namespace

std::shared_ptr<const IterableDataset> WithCachePlan(
    std::shared_ptr<TarShardDataset> dataset, const CacheHandle* cache) {
  if (cache == nullptr) return dataset;
  return ValueOrThrow(
      PlannedTarShards::Create(std::move(dataset), cache->cache));
}

void BindCache(nb::module_& m) {
  nb::class_<CacheHandle>(m, "_Cache",
                          "A CachedStore over a shard list's store.")
      .def("__repr__", [](const CacheHandle& c) { return c.description; });
  m.def("open_cache", &OpenCache, "url"_a, "budget_bytes"_a, "block_bytes"_a,
        "directory"_a,
        "Opens a CachedStore (loader/storage/cache/) over the store of "
        "`url`'s scheme: `budget_bytes` of `block_bytes` blocks, in memory "
        "or in `directory` (kept across restarts).");
  m.def("open_cached_record_file", &OpenCachedRecordFile, "url"_a, "cache"_a,
        "Opens a record file read through `cache`, which the loader plans "
        "(PlannedRecordFile).");
  m.def("cache_stats", &Stats, "cache"_a,
        "The cache's counters (CacheStats) as a dict.");
}

}  // namespace pinwheel::python
