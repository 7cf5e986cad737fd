// RankWait: one rank's wait for data in a fixed-size, trivially copyable
// record, and SlowestRankOf: given every rank's record, the rank that holds
// the job back and its bound stage, in one line. The library does not
// communicate: the caller all-gathers the records as bytes with whatever
// the job already uses (MPI_Allgather, ncclAllGather, torch.distributed).
//
// Example (samples/train/, over MPI):
//   RankWait mine = RankWaitOf(loader.stats(), rank);
//   std::vector<RankWait> all(world_size);
//   MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine,
//                 MPI_BYTE, MPI_COMM_WORLD);
//   if (rank == 0) std::printf("%s\n", SlowestRankOf(all)->line.c_str());
//   // "slowest rank 1 of 2: Next() waits for data p50 8.2 ms, p99 9.1 ms a
//   //  batch (61 % of its time; the other ranks at most p50 0.1 ms); bound
//   //  by reads: p50 8.4 ms a batch over 1 worker against a 5.2 ms step"
//
// Note [the slowest rank]
// In data-parallel training every rank waits for the slowest at the
// gradient all-reduce, so a loader that starves one rank shows as a long
// wait in Next() on that rank only; the others wait inside the all-reduce,
// which their loaders see as a longer step. The rank that holds the job
// back for data is therefore the one whose consumer waits longest in
// Next() for data: the mean over the recent window (LatencyHistogram::
// kRecent batches) of the data_wait latency decides, p50 and p99 are shown,
// and that rank's own verdict (StallVerdictOf) names its bound stage. The
// part of a wait spent behind device buffers the rank's own GPU work still
// holds is left out: a rank whose step is long on its GPU waits there, and
// that is no loader's doing (version 1 of the record counted it). Under
// kLoaderBoundShare of its time waiting for data, no rank is held back by
// data and the line says so.
#ifndef PINWHEEL_LOADER_TELEMETRY_RANK_WAIT_H_
#define PINWHEEL_LOADER_TELEMETRY_RANK_WAIT_H_

#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include "loader/loader_stats.h"

namespace pinwheel {

// One rank's figures, durations in nanoseconds over the recent window. A
// value; thread-compatible. Trivially copyable with a fixed layout (the
// same bytes on every rank of a job: one binary, one architecture), so an
// all-gather may carry it as sizeof(RankWait) bytes.
struct RankWait {
  static constexpr uint32_t kMagic = 0x50575257;  // "WRWP"
  static constexpr uint32_t kVersion = 2;         // 2: wait_* are data_wait's

  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  int32_t rank = -1;
  int32_t num_workers = 0;
  int32_t cpus = 0;
  // StallVerdict::Bound of this rank, as an integer.
  int32_t bound = 0;
  int64_t batches = 0;  // in the window
  // The wait for data (LoaderStats::latency.data_wait).
  int64_t wait_p50_ns = 0;
  int64_t wait_p99_ns = 0;
  int64_t wait_mean_ns = 0;
  int64_t step_mean_ns = 0;
  int64_t step_p50_ns = 0;
  int64_t read_p50_ns = 0;
  int64_t copy_p50_ns = 0;
  // The mean wait behind the rank's own device buffers (consumer_wait's
  // mean less data_wait's): part of the rank's time, not of its wait for
  // data.
  int64_t behind_buffers_mean_ns = 0;
};
static_assert(std::is_trivially_copyable_v<RankWait>);
static_assert(std::is_standard_layout_v<RankWait>);
static_assert(sizeof(RankWait) == 96);

// Returns `stats`' record for `rank`.
RankWait RankWaitOf(const LoaderStats& stats, int rank);

// Returns the record in `bytes` (sizeof(RankWait) of them, as an
// all-gather delivers it), or InvalidArgument naming what is wrong (the
// size, the magic, the version).
absl::StatusOr<RankWait> RankWaitFromBytes(absl::Span<const uint8_t> bytes);

// A value; thread-compatible.
struct SlowestRank {
  int rank = -1;
  // Whether that rank waits for data kLoaderBoundShare of its time or more.
  bool loader_bound = false;
  std::string line;
};

// Returns the slowest rank of `ranks` (one record per rank, any order; see
// Note [the slowest rank]) and its line. InvalidArgument when `ranks` is
// empty, a record's magic or version is wrong, or a rank is negative or
// repeated.
absl::StatusOr<SlowestRank> SlowestRankOf(absl::Span<const RankWait> ranks);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_TELEMETRY_RANK_WAIT_H_
