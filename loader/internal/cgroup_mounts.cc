#include "loader/internal/cgroup_mounts.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "pinning/base/small_file.h"

namespace pinwheel::internal {

namespace {

// mountinfo writes a space, tab, newline or backslash in a path as \ooo.
std::string Unescape(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] >= '0' &&
        text[i + 1] <= '3' && text[i + 2] >= '0' && text[i + 2] <= '7' &&
        text[i + 3] >= '0' && text[i + 3] <= '7') {
      out.push_back(static_cast<char>((text[i + 1] - '0') * 64 +
                                      (text[i + 2] - '0') * 8 +
                                      (text[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace

std::vector<Mount> ParseMountInfo(absl::string_view text) {
  std::vector<Mount> mounts;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    // id parent major:minor root point options [optional...] - type source
    // super-options
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 6 || dash == fields.end() ||
        dash - fields.begin() < 6 || fields.end() - dash < 4) {
      continue;
    }
    Mount mount;
    mount.root = Unescape(fields[3]);
    mount.point = Unescape(fields[4]);
    mount.type = std::string(dash[1]);
    mount.super_options = absl::StrSplit(dash[3], ',');
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

std::string CgroupDirectory(const Mount& mount, absl::string_view path) {
  std::string relative;
  if (mount.root == "/") {
    relative = std::string(path);
  } else if (absl::StartsWith(path, mount.root) &&
             (path.size() == mount.root.size() ||
              path[mount.root.size()] == '/')) {
    relative = std::string(path.substr(mount.root.size()));
  }
  while (!relative.empty() && relative.back() == '/') relative.pop_back();
  std::string point = mount.point;
  while (point.size() > 1 && point.back() == '/') point.pop_back();
  if (point == "/") point.clear();
  return absl::StrCat(point, relative);
}

bool HoldsV1Controller(const Mount& mount, absl::string_view controller) {
  return mount.type == "cgroup" &&
         std::find(mount.super_options.begin(), mount.super_options.end(),
                   controller) != mount.super_options.end();
}

std::vector<std::string> CgroupAndAncestors(std::string dir,
                                            const std::string& top) {
  std::vector<std::string> dirs;
  while (true) {
    dirs.push_back(dir);
    if (dir.size() <= top.size()) break;
    const std::string::size_type slash = dir.find_last_of('/');
    if (slash == std::string::npos || slash < top.size()) break;
    dir = dir.substr(0, slash);
  }
  return dirs;
}

std::optional<CgroupMembership> ReadCgroupMembership(
    const std::string& proc_root) {
  const std::optional<std::string> text =
      ReadSmallFile(absl::StrCat(proc_root, "/self/cgroup"));
  if (!text) return std::nullopt;
  CgroupMembership membership;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    const std::vector<absl::string_view> parts =
        absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3 || parts[2].empty()) continue;
    if (parts[0] == "0" && parts[1].empty()) {
      membership.v2 = std::string(parts[2]);
      continue;
    }
    for (absl::string_view controller : absl::StrSplit(parts[1], ',')) {
      membership.v1[std::string(controller)] = std::string(parts[2]);
    }
  }
  return membership;
}

}  // namespace pinwheel::internal
