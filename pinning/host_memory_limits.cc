#include "pinning/host_memory_limits.h"

#include <cstdint>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "pinning/base/small_file.h"

namespace pinwheel {
namespace {

using internal::ReadSmallFile;

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
    const std::string name = dir.empty() || dir == "/"
                                 ? absl::StrCat(base, "/", file)
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

}  // namespace pinwheel
