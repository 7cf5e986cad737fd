#include "loader/storage/cache/cached_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <system_error>
#include <unistd.h>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "loader/atomic_file.h"
#include "loader/storage/cache/internal/block_file.h"
#include "loader/storage/cache/internal/relock.h"
#include "pinning/base/mutex.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {

using internal::BlockKey;
using internal::kNever;

namespace {

absl::Status CheckOptions(const CacheOptions& o) {
  if (o.block_bytes < 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CacheOptions::block_bytes is ", o.block_bytes, " (need >= 4096)"));
  }
  if (o.budget_bytes < o.block_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("CacheOptions::budget_bytes is ", o.budget_bytes,
                     " (need >= block_bytes, ", o.block_bytes, ")"));
  }
  if (o.prefetch_threads < 1 || o.prefetch_threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("CacheOptions::prefetch_threads is ", o.prefetch_threads,
                     " (need 1..256)"));
  }
  if (o.plan_window_blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CacheOptions::plan_window_blocks is ",
                     o.plan_window_blocks, " (need >= 1)"));
  }
  return absl::OkStatus();
}

absl::Status PreadAll(const std::string& path, int64_t offset,
                      absl::Span<std::byte> out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cache: open ", path));
  }
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd, out.data() + done, out.size() - done,
                static_cast<off_t>(offset) + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      ::close(fd);
      return absl::ErrnoToStatus(
          error, absl::StrCat("cache: pread ", path, " at ", offset + done,
                              n == 0 ? " (end of file)" : ""));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<CachedStore>> CachedStore::Open(
    std::shared_ptr<ObjectStore> underlying, const CacheOptions& options) {
  if (underlying == nullptr) {
    return absl::InvalidArgumentError(
        "CachedStore: the underlying store is null");
  }
  PINWHEEL_RETURN_IF_ERROR(CheckOptions(options));
  std::shared_ptr<CachedStore> cache(
      new CachedStore(std::move(underlying), options));
  PINWHEEL_RETURN_IF_ERROR(cache->Warm());
  if (options.policy == CachePolicy::kBelady && options.prefetch) {
    for (int i = 0; i < options.prefetch_threads; ++i) {
      cache->prefetchers_.emplace_back([c = cache.get()] { c->Prefetcher(); });
    }
  }
  return cache;
}

CachedStore::CachedStore(std::shared_ptr<ObjectStore> underlying,
                         CacheOptions options)
    : underlying_(std::move(underlying)),
      options_(std::move(options)),
      plan_(options_.plan_window_blocks) {}

CachedStore::~CachedStore() {
  {
    internal::MutexLock lock(&mu_);
    stop_ = true;
    ++version_;
  }
  for (std::thread& t : prefetchers_) t.join();
}

int64_t CachedStore::BlockLength(int64_t object_size, int64_t block) const {
  return std::clamp<int64_t>(object_size - block * options_.block_bytes, 0,
                             options_.block_bytes);
}

int32_t CachedStore::UrlId(std::string_view url) {
  const auto [it, inserted] = url_ids_.try_emplace(
      std::string(url), static_cast<int32_t>(urls_.size()));
  if (inserted) urls_.emplace_back(url);
  return it->second;
}

std::string CachedStore::BlockPath(BlockKey key) const {
  return absl::StrCat(
      options_.directory, "/",
      internal::BlockFileName(urls_[static_cast<size_t>(key.url)], key.block));
}

absl::Status CachedStore::Warm() {
  if (options_.directory.empty()) return absl::OkStatus();
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(options_.directory, error);
  if (error) {
    return absl::ErrnoToStatus(
        error.value(),
        absl::StrCat("CachedStore: creating ", options_.directory));
  }
  fs::directory_iterator it(options_.directory, error);
  if (error) {
    return absl::ErrnoToStatus(
        error.value(),
        absl::StrCat("CachedStore: listing ", options_.directory));
  }
  internal::MutexLock lock(&mu_);
  for (; it != fs::directory_iterator(); it.increment(error)) {
    if (error) {
      return absl::ErrnoToStatus(
          error.value(),
          absl::StrCat("CachedStore: listing ", options_.directory));
    }
    const std::string name = it->path().filename().string();
    const std::string path = it->path().string();
    if (!it->is_regular_file(error)) continue;
    if (absl::StrContains(name, ".blk.tmp-")) {  // a killed writer's
      fs::remove(path, error);
      ++stats_.dropped_torn;
      continue;
    }
    if (!absl::EndsWith(name, internal::kBlockFileSuffix)) {
      ++stats_.dropped_foreign;  // not ours: left alone, never served
      continue;
    }
    absl::StatusOr<internal::BlockFileInfo> info =
        internal::ReadBlockFile(path, name);
    const bool fits =
        info.ok() && info->block >= 0 &&
        info->payload_bytes == BlockLength(info->object_size, info->block) &&
        info->payload_bytes > 0;
    if (!fits) {
      // A file from a run with another block size counts as foreign.
      if (!info.ok() && absl::IsDataLoss(info.status())) {
        ++stats_.dropped_torn;
      } else {
        ++stats_.dropped_foreign;
      }
      fs::remove(path, error);
      continue;
    }
    if (held_ + info->payload_bytes > options_.budget_bytes) {
      ++stats_.dropped_over_budget;
      fs::remove(path, error);
      continue;
    }
    const int32_t id = UrlId(info->url);
    const auto [size, inserted] =
        warm_sizes_.try_emplace(id, info->object_size);
    if (!inserted && size->second != info->object_size) {
      ++stats_.dropped_stale;
      fs::remove(path, error);
      continue;
    }
    AddBlock(BlockKey{id, info->block}, info->payload_bytes).resident = true;
    ++stats_.warm_blocks;
    stats_.warm_bytes += info->payload_bytes;
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CachedStore::ObjectSize(std::string_view url,
                                                int32_t* id) {
  {
    internal::MutexLock lock(&mu_);
    *id = UrlId(url);
    const auto it = sizes_.find(*id);
    if (it != sizes_.end()) return it->second;
  }
  // Errors are returned, never kept: the next ask asks again.
  PINWHEEL_ASSIGN_OR_RETURN(const int64_t size, underlying_->Size(url));
  internal::MutexLock lock(&mu_);
  sizes_[*id] = size;
  const auto warm = warm_sizes_.find(*id);
  if (warm != warm_sizes_.end()) {
    if (warm->second != size) {
      // The object changed since its blocks were cached.
      std::vector<BlockKey> stale;
      for (const auto& [key, block] : blocks_) {
        if (key.url == *id && block->resident && block->pins == 0) {
          stale.push_back(key);
        }
      }
      for (const BlockKey key : stale) {
        Evict(key);
        --stats_.evictions;
        ++stats_.dropped_stale;
      }
    }
    warm_sizes_.erase(warm);
  }
  return size;
}

absl::StatusOr<int64_t> CachedStore::Size(std::string_view url) {
  int32_t id = 0;
  return ObjectSize(url, &id);
}

absl::Status CachedStore::AppendPlan(const ReadPlan& plan) {
  internal::MutexLock lock(&mu_);
  for (size_t i = 0; i < plan.reads.size(); ++i) {
    const PlannedRead& read = plan.reads[i];
    if (read.url < 0 || static_cast<size_t>(read.url) >= plan.urls.size() ||
        read.offset < 0 || read.length < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("CachedStore::AppendPlan: read ", i, " (url ", read.url,
                       " of ", plan.urls.size(), ", offset ", read.offset,
                       ", length ", read.length, ") is out of range"));
    }
  }
  for (const PlannedRead& read : plan.reads) {
    if (read.length == 0) continue;
    const int32_t id = UrlId(plan.urls[static_cast<size_t>(read.url)]);
    const int64_t first = read.offset / options_.block_bytes;
    const int64_t last = (read.offset + read.length - 1) / options_.block_bytes;
    for (int64_t b = first; b <= last; ++b) {
      plan_.Append({id, b}, read.stream, read.epoch, read.exact);
    }
  }
  ++version_;
  return absl::OkStatus();
}

void CachedStore::SkipPlanBefore(int64_t epoch) {
  internal::MutexLock lock(&mu_);
  plan_.SkipEpochsBefore(epoch);
  ++version_;
}

CachedStore::Block& CachedStore::AddBlock(BlockKey key, int64_t bytes) {
  auto entry = std::make_unique<Block>();
  entry->bytes = bytes;
  entry->serial = ++last_serial_;
  Block& block = *entry;
  blocks_[key] = std::move(entry);
  held_ += bytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, held_);
  return block;
}

void CachedStore::Forget(BlockKey key) {
  const auto it = blocks_.find(key);
  held_ -= it->second->bytes;
  blocks_.erase(it);
  // Its next planned use is a position to fetch again.
  scan_from_ = std::min(scan_from_, plan_.NextUse(key, plan_.cursor()));
  ++version_;
}

void CachedStore::Evict(BlockKey key) {
  Forget(key);
  ++stats_.evictions;
  ++version_;
  if (!options_.directory.empty()) {
    // A cheap syscall under the lock; the file is not read by anyone (the
    // block had no pins).
    ::unlink(BlockPath(key).c_str());
  }
}

bool CachedStore::MakeRoom(int64_t bytes, int64_t position, bool planned) {
  while (held_ + bytes > options_.budget_bytes) {
    const BlockKey* victim = nullptr;
    int64_t victim_use = -1;
    uint64_t victim_stamp = 0;
    for (const auto& [key, block] : blocks_) {
      if (!block->resident || block->pins > 0) continue;
      int64_t use = 0;  // larger is a better victim
      if (options_.policy == CachePolicy::kBelady) {
        if (plan_.IsCurrent(key)) continue;
        use = plan_.NextUse(key, std::min(position, plan_.cursor()));
        // Outside the plan, only blocks it never needs again make way.
        if (!planned && use != kNever) continue;
      }
      if (victim == nullptr || use > victim_use ||
          (use == victim_use && block->last_used < victim_stamp)) {
        victim = &key;
        victim_use = use;
        victim_stamp = block->last_used;
      }
    }
    if (victim == nullptr) return false;
    Evict(*victim);
  }
  return true;
}

void CachedStore::CountFetch(BlockKey key, int64_t bytes, int64_t epoch) {
  stats_.bytes_fetched += bytes;
  ++stats_.fetches;
  stats_.bytes_fetched_by_epoch[epoch] += bytes;
  if (!fetched_.insert({epoch, key}).second) {
    stats_.bytes_fetched_again += bytes;
  }
}

absl::StatusOr<std::shared_ptr<std::vector<std::byte>>> CachedStore::Fetch(
    BlockKey key, const std::string& url, int64_t object_size) {
  const int64_t length = BlockLength(object_size, key.block);
  const int64_t head =
      options_.directory.empty()
          ? 0
          : internal::kBlockFileHeaderBytes + static_cast<int64_t>(url.size());
  // One buffer: the file's head, then the payload read straight after it.
  auto buffer = std::make_shared<std::vector<std::byte>>(
      static_cast<size_t>(head + length));
  const absl::Span<std::byte> payload =
      absl::MakeSpan(*buffer).subspan(static_cast<size_t>(head));
  PINWHEEL_RETURN_IF_ERROR(
      underlying_->Read({{.url = url,
                          .offset = key.block * options_.block_bytes,
                          .destination = payload}}));
  if (head == 0) return buffer;
  const std::string file_head = internal::EncodeBlockFileHead(
      url, object_size, key.block,
      absl::string_view(reinterpret_cast<const char*>(payload.data()),
                        payload.size()));
  std::memcpy(buffer->data(), file_head.data(), file_head.size());
  const std::string path = absl::StrCat(
      options_.directory, "/", internal::BlockFileName(url, key.block));
  PINWHEEL_RETURN_IF_ERROR(WriteFileAtomically(
      path, absl::string_view(reinterpret_cast<const char*>(buffer->data()),
                              buffer->size())));
  buffer->erase(buffer->begin(), buffer->begin() + head);
  return buffer;
}

absl::Status CachedStore::ReadBlock(int32_t url, int64_t block,
                                    int64_t object_size, int64_t offset,
                                    absl::Span<std::byte> out) {
  const BlockKey key{url, block};
  bool waited = false;
  absl::Time wait_start;
  internal::MutexLock lock(&mu_);
  int64_t position = 0;
  const internal::PlanIndex::Match match = plan_.Touch(key, &position);
  // A read of the block its stream reads now counts as planned too.
  const bool planned = match != internal::PlanIndex::Match::kUnplanned;
  if (!planned) ++stats_.unplanned_reads;
  if (match != internal::PlanIndex::Match::kPlanned) position = plan_.cursor();
  const int64_t epoch = match == internal::PlanIndex::Match::kPlanned
                            ? plan_.epoch(position)
                            : std::max<int64_t>(0, plan_.cursor_epoch());
  // Only a planned touch moves what the prefetcher decides on (Note
  // [prefetch wake-ups]).
  if (match == internal::PlanIndex::Match::kPlanned) ++version_;
  const auto start_waiting = [&] {
    if (waited) return;
    waited = true;
    wait_start = absl::Now();
    ++stats_.misses;
  };
  const auto stop_waiting = [&] {
    if (waited) stats_.reader_wait += absl::Now() - wait_start;
  };
  const std::string name = urls_[static_cast<size_t>(url)];
  // The serial of the in-flight entry this reader pinned while waiting for
  // it (Note [a block a reader waits for]); 0: none.
  uint64_t pinned = 0;
  for (;;) {
    const auto it = blocks_.find(key);
    // A failed fetch dropped the entry we pinned, pin and all.
    if (it == blocks_.end() || it->second->serial != pinned) pinned = 0;
    if (it != blocks_.end() && it->second->resident) {
      if (!waited) ++stats_.hits;
      stop_waiting();
      Block& b = *it->second;
      b.last_used = ++clock_;
      if (pinned == 0) ++b.pins;
      const std::shared_ptr<std::vector<std::byte>> data = b.data;
      const std::string path = BlockPath(key);
      const int64_t file_offset =
          internal::kBlockFileHeaderBytes + static_cast<int64_t>(name.size());
      absl::Status copied;
      internal::Unlock(mu_);
      if (data != nullptr) {
        std::memcpy(out.data(), data->data() + offset, out.size());
      } else {
        copied = PreadAll(path, file_offset + offset, out);
      }
      internal::Relock(mu_);
      if (--blocks_.at(key)->pins == 0 && prefetch_stuck_) ++version_;
      return copied;
    }
    if (it != blocks_.end()) {  // in flight: wait for it, pinned
      start_waiting();
      if (pinned == 0) {
        ++it->second->pins;
        pinned = it->second->serial;
      }
      const uint64_t seen = version_;
      internal::Await(mu_, [&] {
        mu_.AssertHeld();
        return version_ != seen;
      });
      continue;
    }
    start_waiting();
    const int64_t length = BlockLength(object_size, block);
    const std::string& url_name = name;
    if (!MakeRoom(length, position, planned)) {
      // No room without evicting what the plan needs first: read around.
      ++stats_.uncached_reads;
      internal::Unlock(mu_);
      const absl::Status read =
          underlying_->Read({{.url = url_name,
                              .offset = block * options_.block_bytes + offset,
                              .destination = out}});
      internal::Relock(mu_);
      stop_waiting();
      if (!read.ok()) {
        ++stats_.fetch_errors;
        return read;
      }
      stats_.bytes_fetched += static_cast<int64_t>(out.size());
      ++stats_.fetches;
      stats_.bytes_fetched_by_epoch[epoch] += static_cast<int64_t>(out.size());
      return absl::OkStatus();
    }
    AddBlock(key, length);
    internal::Unlock(mu_);
    absl::StatusOr<std::shared_ptr<std::vector<std::byte>>> fetched =
        Fetch(key, url_name, object_size);
    if (fetched.ok()) {
      std::memcpy(out.data(), (*fetched)->data() + offset, out.size());
    }
    internal::Relock(mu_);
    stop_waiting();
    ++version_;
    Block& b = *blocks_.at(key);
    if (!fetched.ok()) {
      Forget(key);
      ++stats_.fetch_errors;
      return fetched.status();
    }
    b.resident = true;
    b.last_used = ++clock_;
    if (options_.directory.empty()) b.data = *std::move(fetched);
    CountFetch(key, length, epoch);
    return absl::OkStatus();
  }
}

absl::Status CachedStore::Read(absl::Span<const RangeRead> reads) {
  for (const RangeRead& read : reads) {
    int32_t id = 0;
    PINWHEEL_ASSIGN_OR_RETURN(const int64_t size, ObjectSize(read.url, &id));
    const auto length = static_cast<int64_t>(read.destination.size());
    if (read.offset < 0 || read.offset > size - length) {
      return absl::OutOfRangeError(
          absl::StrCat("cache: ", read.url, " bytes [", read.offset, ", ",
                       read.offset + length, ") reach outside the object's ",
                       size, " bytes"));
    }
    int64_t done = 0;
    while (done < length) {
      const int64_t at = read.offset + done;
      const int64_t block = at / options_.block_bytes;
      const int64_t in_block = at - block * options_.block_bytes;
      const int64_t n =
          std::min(length - done, options_.block_bytes - in_block);
      PINWHEEL_RETURN_IF_ERROR(
          ReadBlock(id, block, size, in_block,
                    read.destination.subspan(static_cast<size_t>(done),
                                             static_cast<size_t>(n))));
      done += n;
    }
  }
  return absl::OkStatus();
}

CacheStats CachedStore::Stats() const {
  internal::MutexLock lock(&mu_);
  CacheStats stats = stats_;
  stats.skipped_positions = plan_.skipped();
  return stats;
}

int64_t CachedStore::held_bytes() const {
  internal::MutexLock lock(&mu_);
  return held_;
}

}  // namespace pinwheel
