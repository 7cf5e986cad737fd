#include "loader/storage/cache/read_plan.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "loader/pipeline/shard_source.h"
#include "loader/record_file.h"
#include "loader/sampler.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

absl::Status CheckShare(const ProcessShare& share, const PlanEpochs& epochs) {
  if (share.world_size < 1 || share.rank < 0 ||
      share.rank >= share.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("read plan: rank ", share.rank, " of world size ",
                     share.world_size, " (need 0 <= rank < world_size)"));
  }
  if (share.workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("read plan: workers is ", share.workers, " (need >= 1)"));
  }
  if (epochs.first_epoch < 0 || epochs.epochs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "read plan: first_epoch ", epochs.first_epoch, " and epochs ",
        epochs.epochs, " (need first_epoch >= 0, epochs >= 1)"));
  }
  if (epochs.resume != nullptr && epochs.resume->epoch != epochs.first_epoch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "read plan: the checkpoint is of epoch ", epochs.resume->epoch,
        " but first_epoch is ", epochs.first_epoch));
  }
  return absl::OkStatus();
}

// Where a stream resumes: its SaveState() "<file position> <byte offset>"
// (loader/image/tar_shards.h).
struct StreamStart {
  int64_t file_position = 0;
  int64_t offset = 0;
};

absl::StatusOr<std::vector<StreamStart>> TarStarts(
    const LoaderCheckpoint* resume, const ProcessShare& share) {
  std::vector<StreamStart> starts(static_cast<size_t>(share.workers));
  if (resume == nullptr) return starts;
  const int64_t num_shards = int64_t{share.world_size} * share.workers;
  if (resume->kind != LoaderCheckpoint::Kind::kIterable ||
      resume->num_shards != num_shards ||
      resume->shard_states.size() != starts.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("read plan: the checkpoint (", resume->num_shards,
                     " shards, ", resume->shard_states.size(),
                     " on this rank) is not an iterable one of ", num_shards,
                     " shards with ", share.workers, " on this rank"));
  }
  for (size_t s = 0; s < starts.size(); ++s) {
    if (!resume->shard_states[s].has_value()) continue;
    const std::vector<absl::string_view> parts =
        absl::StrSplit(*resume->shard_states[s], ' ', absl::SkipEmpty());
    if (parts.size() != 2 ||
        !absl::SimpleAtoi(parts[0], &starts[s].file_position) ||
        !absl::SimpleAtoi(parts[1], &starts[s].offset) ||
        starts[s].file_position < 0 || starts[s].offset < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "read plan: shard ", s, "'s state \"", *resume->shard_states[s],
          "\" is not \"<file position> <byte offset>\""));
    }
  }
  return starts;
}

// One stream's reads of one epoch, before interleaving.
struct Chunk {
  int32_t url;
  int64_t offset;
  int64_t length;
};

}  // namespace

int64_t ReadPlan::TotalBytes() const {
  int64_t total = 0;
  for (const PlannedRead& read : reads) total += read.length;
  return total;
}

absl::StatusOr<ReadPlan> PlanTarShards(const std::vector<std::string>& urls,
                                       const TarShardOptions& options,
                                       ObjectStore& store,
                                       const ProcessShare& share,
                                       const PlanEpochs& epochs,
                                       int64_t interleave_bytes) {
  PINWHEEL_RETURN_IF_ERROR(CheckShare(share, epochs));
  if (interleave_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "read plan: interleave_bytes is ", interleave_bytes, " (need >= 1)"));
  }
  PINWHEEL_ASSIGN_OR_RETURN(std::vector<StreamStart> starts,
                            TarStarts(epochs.resume, share));
  ReadPlan plan;
  plan.urls = urls;
  std::vector<int64_t> sizes;
  for (const std::string& url : urls) {
    PINWHEEL_ASSIGN_OR_RETURN(const int64_t size, store.Size(url));
    sizes.push_back(size);
  }
  const auto files = static_cast<int64_t>(urls.size());
  const int num_shards = share.world_size * share.workers;
  for (int64_t epoch = epochs.first_epoch;
       epoch < epochs.first_epoch + epochs.epochs; ++epoch) {
    std::vector<std::vector<Chunk>> streams(static_cast<size_t>(share.workers));
    for (int i = 0; i < share.workers; ++i) {
      const auto shard = static_cast<int>(
          internal::ShardSource::StreamOf(share.rank, share.workers, i));
      const std::vector<int64_t> order =
          TarShardStreamFiles(files, options, shard, num_shards, epoch);
      StreamStart start;
      if (epoch == epochs.first_epoch) start = starts[static_cast<size_t>(i)];
      for (auto f = static_cast<size_t>(start.file_position); f < order.size();
           ++f) {
        const auto url = static_cast<int32_t>(order[f]);
        const int64_t size = sizes[static_cast<size_t>(url)];
        int64_t offset =
            f == static_cast<size_t>(start.file_position) ? start.offset : 0;
        while (offset < size) {
          // Chunks end on multiples of interleave_bytes, so that they line
          // up with a cache's blocks of that size.
          const int64_t end = std::min(
              size, (offset / interleave_bytes + 1) * interleave_bytes);
          streams[static_cast<size_t>(i)].push_back(
              {url, offset, end - offset});
          offset = end;
        }
      }
    }
    for (size_t k = 0;; ++k) {
      bool any = false;
      for (size_t i = 0; i < streams.size(); ++i) {
        if (k >= streams[i].size()) continue;
        any = true;
        const Chunk& c = streams[i][k];
        plan.reads.push_back(
            {c.url, static_cast<int32_t>(i), epoch, c.offset, c.length});
      }
      if (!any) break;
    }
  }
  return plan;
}

absl::StatusOr<ReadPlan> PlanRecordFile(const std::string& url,
                                        ObjectStore& store,
                                        const ProcessShare& share,
                                        const RecordSampling& sampling,
                                        const PlanEpochs& epochs) {
  PINWHEEL_RETURN_IF_ERROR(CheckShare(share, epochs));
  PINWHEEL_ASSIGN_OR_RETURN(const int64_t size, store.Size(url));
  // The fixed part of the header (magic, version, header bytes) says how
  // much more to read; the parser checks everything.
  std::vector<std::byte> head(static_cast<size_t>(std::min<int64_t>(16, size)));
  PINWHEEL_RETURN_IF_ERROR(store.Read(
      {{.url = url, .offset = 0, .destination = absl::MakeSpan(head)}}));
  if (head.size() == 16) {
    uint32_t header_bytes = 0;
    std::memcpy(&header_bytes, head.data() + 12, 4);
    head.resize(
        static_cast<size_t>(std::clamp<int64_t>(header_bytes, 16, size)));
    PINWHEEL_RETURN_IF_ERROR(store.Read(
        {{.url = url, .offset = 0, .destination = absl::MakeSpan(head)}}));
  }
  absl::StatusOr<RecordFileHeader> header =
      ParseRecordFileHeader(head, static_cast<uint64_t>(size));
  if (!header.ok()) {
    return absl::Status(
        header.status().code(),
        absl::StrCat("read plan: ", url, ": ", header.status().message()));
  }
  return PlanRecordFile(url, *header, share, sampling, epochs);
}

absl::StatusOr<ReadPlan> PlanRecordFile(const std::string& url,
                                        const RecordFileHeader& header,
                                        const ProcessShare& share,
                                        const RecordSampling& sampling,
                                        const PlanEpochs& epochs) {
  PINWHEEL_RETURN_IF_ERROR(CheckShare(share, epochs));
  const auto count = static_cast<int64_t>(header.count);
  const auto record = static_cast<int64_t>(header.record_bytes);
  int64_t start = 0;
  if (const LoaderCheckpoint* resume = epochs.resume; resume != nullptr) {
    if (resume->kind != LoaderCheckpoint::Kind::kMapStyle ||
        resume->dataset_size != count || resume->shuffle != sampling.shuffle ||
        resume->seed != sampling.seed || resume->custom_order) {
      return absl::InvalidArgumentError(absl::StrCat(
          "read plan: the checkpoint (dataset_size ", resume->dataset_size,
          ", shuffle ", resume->shuffle, ", seed ", resume->seed,
          ") is not one of ", url, " (", count, " records, shuffle ",
          sampling.shuffle, ", seed ", sampling.seed, ")"));
    }
    start = resume->position;
  }
  ReadPlan plan;
  plan.urls = {url};
  for (int64_t epoch = epochs.first_epoch;
       epoch < epochs.first_epoch + epochs.epochs; ++epoch) {
    PINWHEEL_ASSIGN_OR_RETURN(
        std::unique_ptr<DistributedSampler> sampler,
        DistributedSampler::Create(count, share.rank, share.world_size,
                                   sampling.shuffle, sampling.seed,
                                   sampling.drop_tail,
                                   epoch == epochs.first_epoch ? start : 0));
    for (int64_t p = 0; p < sampler->size(); ++p) {
      const int64_t offset =
          header.header_bytes + sampler->At(epoch, p) * record;
      const auto stream = static_cast<int32_t>(
          sampling.batch_size > 0 ? p / sampling.batch_size % kRecordPlanStreams
                                  : 0);
      const bool exact = sampling.batch_size > 0;
      PlannedRead* last = plan.reads.empty() ? nullptr : &plan.reads.back();
      if (!exact && last != nullptr && last->epoch == epoch &&
          last->offset + last->length == offset) {
        last->length += record;
      } else {
        plan.reads.push_back({0, stream, epoch, offset, record, exact});
      }
    }
  }
  return plan;
}

}  // namespace pinwheel
