#include "loader/gather/gather_memory.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

#include "pinning/base/mutex.h"

namespace pinwheel::internal {
namespace {

constexpr uintptr_t kPageBytes = 4096;
// Where a copied region starts in the copy: aligned for the gather's
// widest loads (16 bytes) and more.
constexpr size_t kCopyAlignment = 256;

constexpr size_t AlignUp(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// The copied regions, identified by their addresses and sizes.
using CopyKey = std::vector<std::pair<const std::byte*, size_t>>;

// Copies of regions in one page-aligned allocation of whole pages. Immutable;
// thread-safe.
class RegionCopies {
 public:
  explicit RegionCopies(std::byte* data) : data_(data) {}
  RegionCopies(const RegionCopies&) = delete;
  RegionCopies& operator=(const RegionCopies&) = delete;
  ~RegionCopies() { ::operator delete(data_, std::align_val_t(kPageBytes)); }

  std::byte* data() const { return data_; }

 private:
  std::byte* const data_;
};

// Returns whether `copies` still holds the bytes of `key`'s regions (laid
// out as CopyCache::Get() copies them).
bool HoldsTheSameBytes(const RegionCopies& copies, const CopyKey& key) {
  size_t offset = 0;
  for (const auto& [source, size] : key) {
    offset = AlignUp(offset, kCopyAlignment);
    if (std::memcmp(copies.data() + offset, source, size) != 0) return false;
    offset += size;
  }
  return true;
}

// The live copies, so that loaders over the same regions share one while
// the regions' bytes are unchanged (Note [a copy is shared while its bytes
// are the source's] in gather_memory.h).
class CopyCache {
 public:
  absl::StatusOr<std::shared_ptr<const RegionCopies>> Get(const CopyKey& key,
                                                          uint64_t max_bytes)
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    std::erase_if(copies_,
                  [](const auto& entry) { return entry.second.expired(); });
    if (auto it = copies_.find(key); it != copies_.end()) {
      std::shared_ptr<const RegionCopies> copies = it->second.lock();
      if (copies != nullptr && HoldsTheSameBytes(*copies, key)) return copies;
    }
    size_t bytes = 0;
    for (const auto& [data, size] : key)
      bytes = AlignUp(bytes, kCopyAlignment) + size;
    bytes = AlignUp(bytes, kPageBytes);
    if (bytes > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("gather: copying the dataset's ", key.size(),
                       " small arrays onto pages of their own takes ", bytes,
                       " bytes, more than the ", max_bytes,
                       " left under the host memory limit"));
    }
    auto* data = static_cast<std::byte*>(
        ::operator new(bytes, std::align_val_t(kPageBytes), std::nothrow));
    if (data == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "gather: cannot allocate ", bytes,
          " bytes to copy the dataset's small arrays onto pages of their own"));
    }
    std::memset(data, 0, bytes);
    size_t offset = 0;
    for (const auto& [source, size] : key) {
      offset = AlignUp(offset, kCopyAlignment);
      std::memcpy(data + offset, source, size);
      offset += size;
    }
    auto copies = std::make_shared<const RegionCopies>(data);
    copies_[key] = copies;
    return copies;
  }

 private:
  absl::Mutex mu_;
  std::map<CopyKey, std::weak_ptr<const RegionCopies>> copies_
      ABSL_GUARDED_BY(mu_);
};

CopyCache& Cache() {
  static CopyCache* const cache = new CopyCache();
  return *cache;
}

}  // namespace

absl::StatusOr<GatherMemory> PlaceRegions(const GatherSource& source,
                                          uint64_t max_copy_bytes) {
  GatherMemory memory;
  memory.regions = source.regions;
  CopyKey key;
  std::vector<size_t> copied;  // indices into regions, in key order
  for (size_t r = 0; r < source.regions.size(); ++r) {
    const absl::Span<const std::byte> region = source.regions[r];
    const bool whole_pages =
        reinterpret_cast<uintptr_t>(region.data()) % kPageBytes == 0 &&
        region.size() % kPageBytes == 0;
    if (source.owns_pages || whole_pages || region.empty() ||
        region.size() >= kCopiedRegionBytes) {
      continue;
    }
    key.emplace_back(region.data(), region.size());
    copied.push_back(r);
  }
  if (key.empty()) return memory;
  absl::StatusOr<std::shared_ptr<const RegionCopies>> copies =
      Cache().Get(key, max_copy_bytes);
  if (!copies.ok()) return copies.status();
  size_t offset = 0;
  for (size_t r : copied) {
    offset = AlignUp(offset, kCopyAlignment);
    memory.regions[r] = {(*copies)->data() + offset, source.regions[r].size()};
    offset += source.regions[r].size();
  }
  memory.copies = *std::move(copies);
  return memory;
}

std::vector<absl::Span<const std::byte>> RegisteredRanges(
    absl::Span<const absl::Span<const std::byte>> regions) {
  std::vector<std::pair<uintptr_t, uintptr_t>> pages;  // [begin, end)
  for (absl::Span<const std::byte> region : regions) {
    if (region.empty()) continue;
    const auto begin = reinterpret_cast<uintptr_t>(region.data());
    const uintptr_t end = begin + region.size();
    pages.emplace_back(begin / kPageBytes * kPageBytes,
                       (end + kPageBytes - 1) / kPageBytes * kPageBytes);
  }
  std::sort(pages.begin(), pages.end());
  std::vector<absl::Span<const std::byte>> ranges;
  uintptr_t begin = 0;
  uintptr_t end = 0;
  for (size_t i = 0; i <= pages.size(); ++i) {
    if (i < pages.size() && end != 0 && pages[i].first <= end) {
      end = std::max(end, pages[i].second);
      continue;
    }
    if (end != 0) {
      ranges.emplace_back(reinterpret_cast<const std::byte*>(begin),
                          end - begin);
    }
    if (i < pages.size()) std::tie(begin, end) = pages[i];
  }
  return ranges;
}

}  // namespace pinwheel::internal
