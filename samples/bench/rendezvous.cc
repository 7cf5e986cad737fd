#include "samples/bench/rendezvous.h"

#include <cerrno>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace pinwheel::bench {
namespace {

class SingleProcess final : public Rendezvous {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string Describe() const override { return "one process"; }
  absl::StatusOr<std::vector<std::vector<double>>> AllGather(
      absl::string_view, const std::vector<double>& values) override {
    return std::vector<std::vector<double>>{values};
  }
};

// Returns whether `tag` is safe in a file name (letters, digits, '_', '-').
bool PlainTag(absl::string_view tag) {
  for (char c : tag) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return !tag.empty();
}

}  // namespace

std::unique_ptr<Rendezvous> SingleProcessRendezvous() {
  return std::make_unique<SingleProcess>();
}

absl::StatusOr<std::unique_ptr<Rendezvous>> FileRendezvous::Open(
    const std::string& dir, int rank, int world_size, absl::Duration timeout) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rendezvous in %s: rank %d of world size %d is out of range", dir, rank,
        world_size));
  }
  if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("rendezvous: cannot create the folder %s", dir));
  }
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("rendezvous: cannot read the folder %s", dir));
  }
  const std::string mine = absl::StrCat(".rank", rank);
  std::string stale;
  while (const dirent* entry = readdir(listing)) {
    if (absl::EndsWith(entry->d_name, mine)) stale = entry->d_name;
  }
  closedir(listing);
  if (!stale.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "rendezvous: %s already holds %s, a file of rank %d from an earlier "
        "run; give each run an empty folder (e.g. --results_dir=$OUT/run-N)",
        dir, stale, rank));
  }
  return std::unique_ptr<Rendezvous>(
      new FileRendezvous(dir, rank, world_size, timeout));
}

std::string FileRendezvous::Describe() const {
  return absl::StrCat("files in ", dir_);
}

std::string FileRendezvous::PathOf(int step, absl::string_view tag,
                                   int rank) const {
  return absl::StrFormat("%s/%03d-%s.rank%d", dir_, step, tag, rank);
}

std::string FileRendezvous::FailurePathOf(int rank) const {
  return absl::StrFormat("%s/failed.rank%d", dir_, rank);
}

void FileRendezvous::Abandon(const absl::Status& error) {
  std::ofstream out(FailurePathOf(rank_), std::ios::trunc);
  out << error.ToString() << '\n';
}

absl::StatusOr<std::vector<std::vector<double>>> FileRendezvous::AllGather(
    absl::string_view tag, const std::vector<double>& values) {
  if (!PlainTag(tag)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rendezvous: step tag '%s' must be letters, digits, '_' or '-'", tag));
  }
  const int step = step_++;
  const std::string path = PathOf(step, tag, rank_);
  {
    const std::string temporary = absl::StrCat(path, ".tmp");
    std::ofstream out(temporary, std::ios::trunc);
    out.precision(17);
    for (double v : values) out << v << '\n';
    out.close();
    if (!out) {  // a stream's failure need not set errno
      return absl::InternalError(
          absl::StrFormat("rendezvous: cannot write %s", temporary));
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrFormat("rendezvous: cannot write %s", path));
    }
  }
  // Polls: the other ranks are other processes, whose files are the only
  // signal (200 us apart, far below what any step here takes).
  const absl::Time deadline = absl::Now() + timeout_;
  std::vector<std::vector<double>> all(world_size_);
  std::vector<bool> seen(world_size_, false);
  int missing = world_size_;
  while (true) {
    for (int r = 0; r < world_size_; ++r) {
      if (seen[r]) continue;
      std::ifstream in(PathOf(step, tag, r));
      if (!in) continue;
      double v = 0;
      while (in >> v) all[r].push_back(v);
      seen[r] = true;
      --missing;
      if (all[r].size() != values.size()) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "rendezvous step %d (%s): rank %d gave %d values, rank %d %d: "
            "the ranks run different flags or code",
            step, tag, r, all[r].size(), rank_, values.size()));
      }
    }
    if (missing == 0) return all;
    for (int r = 0; r < world_size_; ++r) {
      if (seen[r]) continue;
      std::ifstream failed(FailurePathOf(r));
      if (!failed) continue;
      std::stringstream why;
      why << failed.rdbuf();
      return absl::AbortedError(absl::StrFormat(
          "rendezvous step %d (%s): rank %d failed: %s", step, tag, r,
          absl::StripTrailingAsciiWhitespace(why.str())));
    }
    if (absl::Now() > deadline) {
      std::vector<int> absent;
      for (int r = 0; r < world_size_; ++r) {
        if (!seen[r]) absent.push_back(r);
      }
      return absl::DeadlineExceededError(absl::StrFormat(
          "rendezvous step %d (%s) in %s: rank(s) %s did not arrive within "
          "%s (did they start, with the same --results_dir, or fail?)",
          step, tag, dir_, absl::StrJoin(absent, ","),
          absl::FormatDuration(timeout_)));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace pinwheel::bench
