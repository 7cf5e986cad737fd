#include "pinning/memory_budget.h"

#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "pinning/base/small_file.h"

namespace pinwheel {
namespace {

using internal::ReadSmallFile;

constexpr uint64_t kPageBytes = 4096;  // as PinnedRing and HostAllocation round
// A cgroup "limit" at or above this is no limit: cgroup v1 writes "unlimited"
// as 2^63 rounded down to a page (9223372036854771712).
constexpr uint64_t kNoLimitAtOrAbove = uint64_t{1} << 62;

// A cgroup limit file's value: "max", or bytes. nullopt: no limit.
std::optional<uint64_t> ParseLimit(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  uint64_t bytes = 0;
  if (text == "max" || !absl::SimpleAtoi(text, &bytes) ||
      bytes >= kNoLimitAtOrAbove) {
    return std::nullopt;
  }
  return bytes;
}

// Reads `file` under `base` + `path` and under every ancestor of `path`,
// keeping the smallest limit in `limits`.
void ReadHierarchy(const std::string& base, absl::string_view path,
                   const char* file, MemoryLimits& limits) {
  std::string dir(path);
  while (true) {
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    const std::string name =
        dir.empty() || dir == "/" ? absl::StrCat(base, "/", file)
                                  : absl::StrCat(base, dir, "/", file);
    if (std::optional<std::string> text = ReadSmallFile(name)) {
      if (std::optional<uint64_t> bytes = ParseLimit(*text)) {
        if (!limits.cgroup_bytes || *bytes < *limits.cgroup_bytes) {
          limits.cgroup_bytes = *bytes;
          limits.cgroup_file = name;
        }
      }
    }
    if (dir.empty() || dir == "/") break;
    const std::string::size_type slash = dir.find_last_of('/');
    dir = slash == std::string::npos || slash == 0 ? "/" : dir.substr(0, slash);
  }
}

std::string Bytes(uint64_t bytes) {
  return absl::StrCat(bytes, " bytes (", bytes >> 20, " MiB)");
}

uint64_t RoundUpToPage(uint64_t bytes) {
  return bytes > UINT64_MAX - (kPageBytes - 1)
             ? UINT64_MAX
             : (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
}

// "what N × S bytes (detail) = T bytes", with the rounding said when it
// changed S; false when T overflows.
bool DescribePart(absl::string_view what, int count, uint64_t bytes_each,
                  absl::string_view detail, uint64_t& total,
                  std::string& text) {
  const uint64_t rounded = RoundUpToPage(bytes_each);
  const bool overflow = __builtin_mul_overflow(
      static_cast<uint64_t>(count < 0 ? 0 : count), rounded, &total);
  text = absl::StrCat(what, count, " × ", rounded, " bytes");
  if (rounded != bytes_each) {
    absl::StrAppend(&text, " (", bytes_each, " rounded up to a multiple of ",
                    kPageBytes, ")");
  }
  if (!detail.empty()) absl::StrAppend(&text, " (", detail, ")");
  if (overflow) {
    absl::StrAppend(&text, " = more than 2^64 bytes");
  } else {
    absl::StrAppend(&text, " = ", total, " bytes");
  }
  return !overflow;
}

}  // namespace

MemoryLimits ReadMemoryLimits(const MemoryLimitSources& sources) {
  MemoryLimits limits;
  if (sources.physical_bytes) {
    limits.physical_bytes = sources.physical_bytes;
  } else {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0) {
      limits.physical_bytes =
          static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
    }
  }
  const std::optional<std::string> membership =
      ReadSmallFile(sources.proc_self_cgroup);
  if (!membership) return limits;
  // Lines "hierarchy-ID:controller-list:cgroup-path" (cgroups(7)).
  for (absl::string_view line : absl::StrSplit(*membership, '\n')) {
    const std::vector<absl::string_view> parts =
        absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3 || parts[2].empty()) continue;
    if (parts[0] == "0" && parts[1].empty()) {  // cgroup v2
      ReadHierarchy(sources.cgroup_root, parts[2], "memory.max", limits);
      continue;
    }
    for (absl::string_view controller : absl::StrSplit(parts[1], ',')) {
      if (controller == "memory") {  // cgroup v1
        ReadHierarchy(absl::StrCat(sources.cgroup_root, "/memory"), parts[2],
                      "memory.limit_in_bytes", limits);
      }
    }
  }
  return limits;
}

absl::Status AdmitHostMemory(const HostMemoryPlan& plan,
                             const MemoryLimits& limits) {
  uint64_t ring = 0;
  uint64_t pool = 0;
  std::string ring_text;
  std::string pool_text;
  const std::string slot_detail =
      plan.batch_size > 0 && plan.sample_bytes > 0
          ? absl::StrCat("batch_size ", plan.batch_size, " × ",
                         plan.sample_bytes, " bytes per sample")
          : std::string();
  bool fits_64_bits =
      DescribePart("pinned ring of prefetch = ", plan.ring_slots,
                   plan.slot_bytes, slot_detail, ring, ring_text);
  std::string parts = ring_text;
  if (plan.pool_buffers > 0) {
    fits_64_bits &= DescribePart(
        "+ device buffer pool in host memory (host backend) of "
        "device_buffers = ",
        plan.pool_buffers, plan.pool_buffer_bytes, "", pool, pool_text);
    absl::StrAppend(&parts, " ", pool_text);
  }
  uint64_t sum = 0;
  if (!fits_64_bits || __builtin_add_overflow(ring, pool, &sum)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "host memory: ", parts, ": the sum overflows 64 bits"));
  }
  // The smallest limit is the one that counts.
  std::optional<uint64_t> limit;
  std::string limit_text;
  if (limits.physical_bytes) {
    limit = limits.physical_bytes;
    limit_text = absl::StrCat("the machine's physical memory ",
                              Bytes(*limits.physical_bytes));
  }
  if (limits.cgroup_bytes && (!limit || *limits.cgroup_bytes < *limit)) {
    limit = limits.cgroup_bytes;
    limit_text = absl::StrCat("the cgroup memory limit ",
                              Bytes(*limits.cgroup_bytes), " of ",
                              limits.cgroup_file);
  }
  if (!limit || sum <= *limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "host memory: ", parts, " = ", Bytes(sum), " in all, more than ",
      limit_text, "; lower prefetch, batch_size or device_buffers"));
}

}  // namespace pinwheel
