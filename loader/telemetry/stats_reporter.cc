#include "loader/telemetry/stats_reporter.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

#include "loader/telemetry/stats_export.h"
#include "pinning/base/call_user.h"
#include "pinning/base/mutex.h"

namespace pinwheel::internal {
namespace {

absl::Status BadReportOption(absl::string_view option, absl::string_view value,
                             absl::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat("LoaderBuilder: option 'stats_report.", option,
                   "' = ", value, ": ", rule));
}

}  // namespace

absl::StatusOr<std::unique_ptr<StatsReporter>> StatsReporter::Start(
    const StatsReportOptions& options, Complete complete) {
  const bool sink = options.callback != nullptr || !options.path.empty();
  const bool interval =
      options.every != absl::ZeroDuration() || options.every_batches != 0;
  if (options.every < absl::ZeroDuration() ||
      options.every == absl::InfiniteDuration()) {
    return BadReportOption("every", absl::FormatDuration(options.every),
                           "must be > 0 and finite (ZeroDuration: off)");
  }
  if (options.every_batches < 0) {
    return BadReportOption("every_batches", absl::StrCat(options.every_batches),
                           "must be >= 0 (0: off)");
  }
  if (!sink && interval) {
    return BadReportOption(
        options.every != absl::ZeroDuration() ? "every" : "every_batches",
        options.every != absl::ZeroDuration()
            ? absl::FormatDuration(options.every)
            : absl::StrCat(options.every_batches),
        "an interval without a sink: set stats_report.callback or "
        "stats_report.path");
  }
  if (!sink) return std::unique_ptr<StatsReporter>();
  if (!interval) {
    return BadReportOption(
        options.path.empty() ? "callback" : "path",
        options.path.empty() ? "set" : options.path,
        "a sink without an interval: set stats_report.every (a duration) "
        "or stats_report.every_batches");
  }
  int fd = -1;
  if (!options.path.empty()) {
    fd = open(options.path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
              0644);
    if (fd < 0) {
      const int error = errno;
      return BadReportOption("path", options.path,
                             absl::StrCat("cannot be opened for appending: ",
                                          std::strerror(error)));
    }
  }
  std::unique_ptr<StatsReporter> reporter(
      new StatsReporter(options, std::move(complete), fd));
  reporter->thread_ = std::thread([r = reporter.get()] { r->Run(); });
  return reporter;
}

StatsReporter::StatsReporter(const StatsReportOptions& options,
                             Complete complete, int fd)
    : every_(options.every),
      every_batches_(options.every_batches),
      callback_(options.callback),
      path_(options.path),
      fd_(fd),
      complete_(std::move(complete)) {}

StatsReporter::~StatsReporter() {
  {
    MutexLock lock(&mu_);
    queued_.clear();  // no report after Stop() was skipped: see the header
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) close(fd_);
}

void StatsReporter::HandOver(LoaderStats consumer) {
  wanted_.store(false, std::memory_order_relaxed);
  MutexLock lock(&mu_);
  if (queued_.size() >= kMaxQueued) {
    ++dropped_;
    return;
  }
  queued_.push_back(std::move(consumer));
}

void StatsReporter::Stop(LoaderStats final_stats) {
  if (stopped_) return;
  stopped_ = true;
  {
    MutexLock lock(&mu_);
    queued_.push_back(std::move(final_stats));
    final_ = true;
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status StatsReporter::status() const {
  MutexLock lock(&mu_);
  return status_;
}

int64_t StatsReporter::reports() const {
  MutexLock lock(&mu_);
  return reports_;
}

void StatsReporter::Run() {
  absl::Time next_tick = every_ > absl::ZeroDuration() ? absl::Now() + every_
                                                       : absl::InfiniteFuture();
  // A timed report was asked of the consumer and not answered yet.
  bool asked = false;
  while (true) {
    LoaderStats stats;
    bool report = false;
    bool final_report = false;
    int64_t number = 0;
    int64_t dropped = 0;
    {
      MutexLock lock(&mu_);
      // Through pinning/base/mutex.h: TSan cannot see inside Debian's
      // Abseil (Note [ThreadSanitizer and the system libraries]).
      AwaitWithDeadline(
          mu_,
          [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return !queued_.empty() || stop_;
          },
          next_tick);
      if (!queued_.empty()) {
        stats = std::move(queued_.front());
        queued_.pop_front();
        consumer_ = stats;
        final_report = final_ && queued_.empty();
        report = true;
        asked = false;
      } else if (stop_) {
        return;
      } else {
        // A tick. The consumer did not answer the last one within an
        // interval: report its counters as of its last hand-over.
        if (asked) {
          stats = consumer_;
          report = true;
        }
        asked = true;
        wanted_.store(true, std::memory_order_relaxed);
        const absl::Time now = absl::Now();
        next_tick += every_;
        if (next_tick <= now) next_tick = now + every_;  // fell behind
      }
      if (!status_.ok()) {
        if (final_report) return;
        continue;  // a sink failed: no more reports
      }
      number = reports_ + 1;
      dropped = dropped_;
    }
    if (report) {
      absl::Status status =
          Report(std::move(stats), final_report, number, dropped);
      MutexLock lock(&mu_);
      if (status.ok()) {
        ++reports_;
      } else if (status_.ok()) {
        status_ = status;
        wanted_.store(false, std::memory_order_relaxed);
        std::fprintf(stderr, "pinwheel: stats reports stopped after %lld: %s\n",
                     static_cast<long long>(reports_),
                     status_.ToString().c_str());
      }
    }
    if (final_report) return;
  }
}

absl::Status StatsReporter::Report(LoaderStats stats, bool final_report,
                                   int64_t number, int64_t dropped) {
  complete_(&stats);
  const std::string json = StatsToJson(stats);  // "{...}"
  std::string line = absl::StrFormat(
      "{\"unix_time_s\":%.6f,\"report\":%d,\"reports_dropped\":%d,"
      "\"final\":%s,",
      absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()), number, dropped,
      final_report ? "true" : "false");
  line.append(json, 1, std::string::npos);
  if (callback_ != nullptr) {
    bool threw = false;
    absl::Status status = CallUser("stats_report.callback", [&] {
      threw = true;
      absl::Status returned = callback_(line);
      threw = false;
      return returned;
    });
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          threw ? absl::StrCat(status.message(), " (report ", number, ")")
                : absl::StrCat("stats_report.callback returned an error on "
                               "report ",
                               number, ": ", status.message()));
    }
  }
  if (fd_ >= 0) {
    line.push_back('\n');
    ssize_t written;
    do {
      written = write(fd_, line.data(), line.size());
    } while (written < 0 && errno == EINTR);
    if (written < 0) {
      const int error = errno;
      return absl::UnavailableError(
          absl::StrCat("stats_report.path '", path_, "': writing report ",
                       number, " failed: ", std::strerror(error)));
    }
    if (static_cast<size_t>(written) != line.size()) {
      return absl::UnavailableError(
          absl::StrCat("stats_report.path '", path_, "': report ", number,
                       " written short (", written, " of ", line.size(),
                       " bytes; the disk may be full)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pinwheel::internal
