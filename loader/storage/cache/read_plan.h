// ReadPlan: every read a process will make in the coming epochs, in order,
// computed from the same functions the loader orders its reads with. A
// cache (loader/storage/cache/cached_store.h) prefetches in this order and
// evicts by next use in it.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(
//       ReadPlan plan,
//       PlanTarShards(urls, tar_options, *store,
//                     {.rank = rank, .world_size = world, .workers = 8},
//                     {.first_epoch = epoch, .epochs = 2}));
//   PINWHEEL_RETURN_IF_ERROR(cache->AppendPlan(plan));
//
// Note [where the order comes from]
// Nothing here orders reads by itself. Tar shards: stream s of num_shards
// (ShardSource::StreamOf(rank, workers, worker)) reads the files
// TarShardStreamFiles() lists, each whole, in that order, and resumes from
// its SaveState() "<file position> <byte offset>" (loader/image/
// tar_shards.h). The process's streams run side by side, so the plan deals
// them round-robin, `interleave_bytes` of a stream at a time: the order the
// cache sees when every stream reads at the same pace (readers that drift
// from it within CacheOptions::plan_window_blocks still count as planned).
// Record files: the rank reads the record indices DistributedSampler gives
// (a resumed epoch starting at the checkpoint's global position, as the
// loader's own resume does), each record at header + index × record bytes.
#ifndef PINWHEEL_LOADER_STORAGE_CACHE_READ_PLAN_H_
#define PINWHEEL_LOADER_STORAGE_CACHE_READ_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "loader/image/tar_shards.h"
#include "loader/loader_checkpoint.h"
#include "loader/record_file.h"
#include "loader/storage/object_store.h"

namespace pinwheel {

// One planned read: `length` bytes at `offset` of urls[url].
struct PlannedRead {
  int32_t url = 0;     // index into ReadPlan::urls
  int32_t stream = 0;  // the process's stream (worker) that reads it
  int64_t epoch = 0;
  int64_t offset = 0;
  int64_t length = 0;
  // Made by exactly one read (a record's): its touches are never merged
  // with the stream's previous touch of the same block, and the first read
  // of its block within the window consumes it even while another stream
  // reads that block (Note [matching reads to the plan]).
  bool exact = false;
};

// A value; thread-compatible.
struct ReadPlan {
  std::vector<std::string> urls;
  std::vector<PlannedRead> reads;  // in the order they are expected
  // The bytes of all reads.
  int64_t TotalBytes() const;
};

// Which part of the job this process is.
struct ProcessShare {
  int rank = 0;        // 0 <= rank < world_size
  int world_size = 1;  // >= 1
  int workers = 1;     // the loader's num_workers (streams per rank), >= 1
};

// Which epochs to plan.
struct PlanEpochs {
  int64_t first_epoch = 0;  // >= 0
  int64_t epochs = 2;       // >= 1: first_epoch .. first_epoch + epochs - 1
  // When not null, the first epoch continues from this checkpoint (taken by
  // the loader this plan is for; its epoch must be first_epoch). Borrowed
  // for the call.
  const LoaderCheckpoint* resume = nullptr;
};

// Returns the plan of a TarShardDataset over `urls` with `options`
// (shuffle_shards and seed matter) for `share`, whole files dealt
// `interleave_bytes` (>= 1) at a time. Sizes come from store.Size() (its
// errors returned naming the URL). InvalidArgument names a bad share,
// epoch range, interleave, or a checkpoint that does not fit (not
// iterable, other num_shards or shard count, an unparsable state).
[[nodiscard]] absl::StatusOr<ReadPlan> PlanTarShards(
    const std::vector<std::string>& urls, const TarShardOptions& options,
    ObjectStore& store, const ProcessShare& share, const PlanEpochs& epochs,
    int64_t interleave_bytes = int64_t{8} << 20);

// How a RecordFileDataset is sampled (the loader's shuffle, seed and
// drop_uneven_tail).
struct RecordSampling {
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_tail = false;
  // > 0: the loader's batch_size. Its workers read several batches at once,
  // so each batch is a stream of the plan (batch b of the epoch is stream
  // b % kRecordPlanStreams) and each record an exact read (PlannedRead::
  // exact: batches read side by side often share a block), and reads far
  // ahead in the epoch's order still match (Note [matching reads to the
  // plan] in internal/plan_index.h). 0: the whole epoch is one stream,
  // adjacent records merged.
  int64_t batch_size = 0;
};

// Streams a record file's plan deals its batches to: more than the batches
// a loader has in flight (workers + prefetch).
inline constexpr int64_t kRecordPlanStreams = 256;

// Returns the plan of a RecordFileDataset at `url` for `share` (workers do
// not matter: one stream): its header is read through `store` (errors
// named: a bad header is the parser's error prefixed with the URL), then
// each epoch's records in the sampler's order, adjacent records merged
// into one read. A checkpoint must be map-style with this dataset size,
// shuffle and seed (InvalidArgument naming the field otherwise).
[[nodiscard]] absl::StatusOr<ReadPlan> PlanRecordFile(
    const std::string& url, ObjectStore& store, const ProcessShare& share,
    const RecordSampling& sampling, const PlanEpochs& epochs);
// The same with the header already read (RecordFileDataset::header()):
// reads nothing.
[[nodiscard]] absl::StatusOr<ReadPlan> PlanRecordFile(
    const std::string& url, const RecordFileHeader& header,
    const ProcessShare& share, const RecordSampling& sampling,
    const PlanEpochs& epochs);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_CACHE_READ_PLAN_H_
