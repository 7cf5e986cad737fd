#include "loader/storage/internal/http_transport.h"

#include <algorithm>
#include <atomic>
#include <curl/curl.h>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/storage/internal/http_transport_attempt.h"
#include "pinning/base/mutex.h"

namespace pinwheel::internal {
namespace {

std::once_flag curl_global_once;

}  // namespace

// The I/O thread and the multi handle. Thread-safe: Submit() from any
// thread; everything else runs on the I/O thread.
class HttpTransport::Engine {
 public:
  // `options.max_in_flight` is this engine's share.
  explicit Engine(const StoreOptions& options)
      : options_(options), multi_(curl_multi_init()) {
    curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                      static_cast<long>(options_.max_in_flight));  // NOLINT
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS,
                      static_cast<long>(options_.max_in_flight));  // NOLINT
    thread_ = std::thread([this] { Loop(); });
  }

  ~Engine() {
    {
      MutexLock lock(&mu_);
      stop_ = true;
    }
    curl_multi_wakeup(multi_);
    thread_.join();
    for (CURL* easy : free_easies_) curl_easy_cleanup(easy);
    curl_multi_cleanup(multi_);
  }

  // Runs `transfers` (of one batch) to completion; returns the batch's
  // first error.
  absl::Status Run(std::vector<HttpTransfer>& transfers, HttpBatch& batch) {
    if (transfers.empty()) return absl::OkStatus();
    {
      MutexLock lock(&batch.mu);
      batch.remaining = static_cast<int>(transfers.size());
    }
    {
      MutexLock lock(&mu_);
      for (HttpTransfer& t : transfers) incoming_.push_back(&t);
    }
    curl_multi_wakeup(multi_);
    MutexLock lock(&batch.mu);
    Await(batch.mu, [&batch]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(batch.mu) {
      return batch.remaining == 0;
    });
    return batch.first_error;
  }

 private:
  void Loop() {
    for (;;) {
      {
        MutexLock lock(&mu_);
        if (stop_) return;
        while (!incoming_.empty()) {
          ready_.push_back(incoming_.front());
          incoming_.pop_front();
        }
      }
      const absl::Time now = absl::Now();
      // Retries that are due (or whose batch has failed) become ready.
      for (size_t i = 0; i < waiting_.size();) {
        HttpTransfer* t = waiting_[i];
        if (t->retry_at <= now || t->batch->failed.load()) {
          ready_.push_back(t);
          waiting_[i] = waiting_.back();
          waiting_.pop_back();
        } else {
          ++i;
        }
      }
      while (active_ < options_.max_in_flight && !ready_.empty()) {
        HttpTransfer* t = ready_.front();
        ready_.pop_front();
        if (t->batch->failed.load()) {
          Complete(t, absl::CancelledError("not started"));
          continue;
        }
        Start(t);
      }
      int running = 0;
      curl_multi_perform(multi_, &running);
      int queued = 0;
      while (CURLMsg* message = curl_multi_info_read(multi_, &queued)) {
        if (message->msg != CURLMSG_DONE) continue;
        HttpTransfer* t = nullptr;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &t);
        Finish(t, message->data.result);
      }
      int timeout_ms = 1000;
      if (!ready_.empty() && active_ < options_.max_in_flight) timeout_ms = 0;
      for (const HttpTransfer* t : waiting_) {
        const int64_t until = absl::ToInt64Milliseconds(t->retry_at - now);
        timeout_ms = static_cast<int>(
            std::clamp<int64_t>(until, 0, int64_t{timeout_ms}));
      }
      curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
    }
  }

  void Start(HttpTransfer* t) {
    CURL* easy = nullptr;
    if (free_easies_.empty()) {
      easy = curl_easy_init();
    } else {
      easy = free_easies_.back();
      free_easies_.pop_back();
      curl_easy_reset(easy);
    }
    PrepareAttempt(*t, easy, options_);
    curl_multi_add_handle(multi_, easy);
    ++active_;
  }

  void Finish(HttpTransfer* t, CURLcode rc) {
    CURL* easy = t->easy;
    long status = 0;  // NOLINT(runtime/int)
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_off_t content_length = -1;
    curl_easy_getinfo(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
                      &content_length);
    curl_multi_remove_handle(multi_, easy);
    --active_;
    curl_slist_free_all(t->headers);
    t->headers = nullptr;
    t->easy = nullptr;
    free_easies_.push_back(easy);

    if (t->batch->failed.load()) {
      Complete(t, absl::CancelledError("stopped"));
      return;
    }
    AttemptVerdict verdict =
        JudgeAttempt(*t, rc, status, content_length, options_);
    if (verdict.retry) {
      waiting_.push_back(t);
      return;
    }
    Complete(t, std::move(verdict.status));
  }

  // Records `t`'s outcome in its batch. `t` and its batch may be gone once
  // this returns (the caller wakes up).
  void Complete(HttpTransfer* t, absl::Status status) {
    HttpBatch* batch = t->batch;
    MutexLock lock(&batch->mu);
    if (!status.ok() && batch->first_error.ok() &&
        status.code() != absl::StatusCode::kCancelled) {
      batch->first_error = std::move(status);
      batch->failed.store(true);
    }
    --batch->remaining;
  }

  const StoreOptions options_;
  CURLM* const multi_;
  std::thread thread_;
  absl::Mutex mu_;
  std::deque<HttpTransfer*> incoming_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The I/O thread's own.
  std::deque<HttpTransfer*> ready_;
  std::vector<HttpTransfer*> waiting_;  // retries, until their retry_at
  int active_ = 0;
  std::vector<CURL*> free_easies_;
};

absl::StatusOr<std::unique_ptr<HttpTransport>> HttpTransport::Create(
    const StoreOptions& options) {
  auto invalid = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("StoreOptions: ", what));
  };
  if (options.max_in_flight < 1) {
    return invalid(absl::StrCat("max_in_flight = ", options.max_in_flight,
                                " must be >= 1"));
  }
  if (options.io_threads < 1) {
    return invalid(
        absl::StrCat("io_threads = ", options.io_threads, " must be >= 1"));
  }
  if (options.max_request_bytes < 4096) {
    return invalid(absl::StrCat(
        "max_request_bytes = ", options.max_request_bytes, " must be >= 4096"));
  }
  if (options.receive_buffer_bytes < (16 << 10) ||
      options.receive_buffer_bytes > (10 << 20)) {
    return invalid(
        absl::StrCat("receive_buffer_bytes = ", options.receive_buffer_bytes,
                     " must be in [16384, 10485760]"));
  }
  if (options.max_attempts < 1) {
    return invalid(
        absl::StrCat("max_attempts = ", options.max_attempts, " must be >= 1"));
  }
  if (options.initial_backoff <= absl::ZeroDuration() ||
      options.max_backoff < options.initial_backoff) {
    return invalid(absl::StrCat(
        "initial_backoff = ", absl::FormatDuration(options.initial_backoff),
        " and max_backoff = ", absl::FormatDuration(options.max_backoff),
        " must satisfy 0 < initial_backoff <= max_backoff"));
  }
  if (options.connect_timeout <= absl::ZeroDuration() ||
      options.request_timeout <= absl::ZeroDuration()) {
    return invalid(absl::StrCat(
        "connect_timeout = ", absl::FormatDuration(options.connect_timeout),
        " and request_timeout = ",
        absl::FormatDuration(options.request_timeout), " must be > 0"));
  }
  CURLcode init = CURLE_OK;
  std::call_once(curl_global_once,
                 [&init] { init = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (init != CURLE_OK) {
    return absl::InternalError(
        absl::StrCat("curl_global_init failed: ", curl_easy_strerror(init)));
  }
  std::vector<std::unique_ptr<Engine>> engines;
  // A thread has at least one request in flight, or it would idle.
  const int threads = std::min(options.io_threads, options.max_in_flight);
  for (int i = 0; i < threads; ++i) {
    StoreOptions share = options;
    share.max_in_flight =
        options.max_in_flight / threads + (i < options.max_in_flight % threads);
    engines.push_back(std::make_unique<Engine>(share));
  }
  return std::unique_ptr<HttpTransport>(
      new HttpTransport(std::move(engines), options.max_request_bytes));
}

HttpTransport::HttpTransport(std::vector<std::unique_ptr<Engine>> engines,
                             int64_t max_request_bytes)
    : engines_(std::move(engines)), max_request_bytes_(max_request_bytes) {}

HttpTransport::Engine& HttpTransport::NextEngine() {
  return *engines_[next_engine_.fetch_add(1, std::memory_order_relaxed) %
                   engines_.size()];
}

HttpTransport::~HttpTransport() = default;

absl::Status HttpTransport::Get(absl::Span<const HttpRangeGet> gets,
                                const HttpSigning& signing) {
  HttpBatch batch;
  batch.signing = &signing;
  std::vector<HttpTransfer> transfers;
  for (const HttpRangeGet& get : gets) {
    const std::string& name = get.name.empty() ? get.url : get.name;
    if (get.offset < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GET ", name, ": the offset ", get.offset, " is negative"));
    }
    const auto size = static_cast<int64_t>(get.destination.size());
    const int64_t step = max_request_bytes_;
    for (int64_t at = 0; at < size; at += step) {
      HttpTransfer& t = transfers.emplace_back();
      t.batch = &batch;
      t.url = get.url;
      t.name = name;
      t.offset = get.offset + at;
      t.destination = get.destination.subspan(
          static_cast<size_t>(at),
          static_cast<size_t>(std::min(step, size - at)));
    }
  }
  return NextEngine().Run(transfers, batch);
}

absl::StatusOr<int64_t> HttpTransport::Head(const std::string& url,
                                            const std::string& name,
                                            const HttpSigning& signing) {
  HttpBatch batch;
  batch.signing = &signing;
  std::vector<HttpTransfer> transfers(1);
  transfers[0].batch = &batch;
  transfers[0].url = url;
  transfers[0].name = name.empty() ? url : name;
  transfers[0].head = true;
  if (absl::Status s = NextEngine().Run(transfers, batch); !s.ok()) return s;
  return transfers[0].content_length;
}

}  // namespace pinwheel::internal
