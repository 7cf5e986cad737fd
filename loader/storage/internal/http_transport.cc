#include "loader/storage/internal/http_transport.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
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
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/storage/internal/http_response.h"
#include "pinning/base/mutex.h"

namespace pinwheel::internal {
namespace {

// One Get() or Head() call: its requests count down `remaining`.
struct Batch {
  const HttpSigning* signing = nullptr;
  absl::Mutex mu;
  int remaining ABSL_GUARDED_BY(mu) = 0;
  absl::Status first_error ABSL_GUARDED_BY(mu);
  // Set with first_error: requests not yet started are not started, and
  // running ones stop at their next write.
  std::atomic<bool> failed{false};
};

// One HTTP request and its attempts. Owned by the caller of Get()/Head();
// touched by the I/O thread only between Submit and its completion.
struct Transfer {
  Batch* batch = nullptr;
  std::string url;
  std::string name;  // how errors name the object
  int64_t offset = 0;
  absl::Span<std::byte> destination;
  bool head = false;
  int64_t content_length = -1;  // a HEAD's result
  int attempt = 0;              // attempts started
  absl::Time retry_at;
  // The running attempt (reset by Start()).
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  long status = 0;  // NOLINT(runtime/int): libcurl's type
  size_t written = 0;
  int64_t skipped = 0;  // bytes of a 200 (whole object) body before offset
  bool filled_from_whole_body = false;
  bool overflow = false;
  std::string content_range;
  std::string error_body;  // the first KiB of a non-2xx body
  char error_text[CURL_ERROR_SIZE] = {};
};

constexpr size_t kErrorBodyBytes = 1024;

std::once_flag curl_global_once;

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  const absl::string_view line(data, bytes);
  if (absl::StartsWith(line, "HTTP/")) {  // a new response (redirect, 100)
    t->content_range.clear();
    t->status = 0;
  } else if (absl::StartsWithIgnoreCase(line, "content-range:")) {
    t->content_range = std::string(absl::StripAsciiWhitespace(line.substr(14)));
  }
  return bytes;
}

// See Note [straight into the destination] in http_transport.h.
size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t left = size * count;
  const size_t bytes = left;
  if (t->batch->failed.load(std::memory_order_relaxed)) return 0;  // abort
  if (t->status == 0)
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
  if (t->status != 200 && t->status != 206) {
    const size_t keep =
        std::min(left, kErrorBodyBytes -
                           std::min(kErrorBodyBytes, t->error_body.size()));
    t->error_body.append(data, keep);
    return bytes;
  }
  if (t->status == 200 && t->skipped < t->offset) {
    // The server ignored the Range header and sends the whole object.
    const auto skip = static_cast<size_t>(
        std::min<int64_t>(static_cast<int64_t>(left), t->offset - t->skipped));
    t->skipped += static_cast<int64_t>(skip);
    data += skip;
    left -= skip;
  }
  const size_t room = t->destination.size() - t->written;
  if (left > room) {
    if (t->status == 206) {
      t->overflow = true;
      return 0;
    }
    std::memcpy(t->destination.data() + t->written, data, room);
    t->written += room;
    t->filled_from_whole_body = true;
    return 0;  // ours is complete; the rest of the object is not wanted
  }
  std::memcpy(t->destination.data() + t->written, data, left);
  t->written += left;
  return bytes;
}

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
  absl::Status Run(std::vector<Transfer>& transfers, Batch& batch) {
    if (transfers.empty()) return absl::OkStatus();
    {
      MutexLock lock(&batch.mu);
      batch.remaining = static_cast<int>(transfers.size());
    }
    {
      MutexLock lock(&mu_);
      for (Transfer& t : transfers) incoming_.push_back(&t);
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
        Transfer* t = waiting_[i];
        if (t->retry_at <= now || t->batch->failed.load()) {
          ready_.push_back(t);
          waiting_[i] = waiting_.back();
          waiting_.pop_back();
        } else {
          ++i;
        }
      }
      while (active_ < options_.max_in_flight && !ready_.empty()) {
        Transfer* t = ready_.front();
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
        Transfer* t = nullptr;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &t);
        Finish(t, message->data.result);
      }
      int timeout_ms = 1000;
      if (!ready_.empty() && active_ < options_.max_in_flight) timeout_ms = 0;
      for (const Transfer* t : waiting_) {
        const int64_t until = absl::ToInt64Milliseconds(t->retry_at - now);
        timeout_ms = static_cast<int>(
            std::clamp<int64_t>(until, 0, int64_t{timeout_ms}));
      }
      curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
    }
  }

  void Start(Transfer* t) {
    CURL* easy = nullptr;
    if (free_easies_.empty()) {
      easy = curl_easy_init();
    } else {
      easy = free_easies_.back();
      free_easies_.pop_back();
      curl_easy_reset(easy);
    }
    ++t->attempt;
    t->easy = easy;
    t->status = 0;
    t->written = 0;
    t->skipped = 0;
    t->filled_from_whole_body = false;
    t->overflow = false;
    t->content_range.clear();
    t->error_body.clear();
    t->error_text[0] = '\0';
    curl_easy_setopt(easy, CURLOPT_URL, t->url.c_str());
    curl_easy_setopt(easy, CURLOPT_PRIVATE, t);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t->error_text);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(  // NOLINT(runtime/int)
                         absl::ToInt64Milliseconds(options_.connect_timeout)));
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(  // NOLINT(runtime/int)
                         absl::ToInt64Milliseconds(options_.request_timeout)));
    curl_easy_setopt(easy, CURLOPT_BUFFERSIZE,
                     static_cast<long>(  // NOLINT(runtime/int)
                         options_.receive_buffer_bytes));
    if (!options_.verify_tls) {
      curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
    const HttpSigning& signing = *t->batch->signing;
    curl_slist* headers = nullptr;
    if (t->head) {
      curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    } else {
      headers = curl_slist_append(
          headers,
          absl::StrCat("Range: ",
                       RangeHeaderValue(t->offset, static_cast<int64_t>(
                                                       t->destination.size())))
              .c_str());
    }
    for (const std::string& header : signing.headers) {
      headers = curl_slist_append(headers, header.c_str());
    }
    if (!signing.aws_sigv4.empty()) {
      curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, signing.aws_sigv4.c_str());
      curl_easy_setopt(easy, CURLOPT_USERNAME, signing.username.c_str());
      curl_easy_setopt(easy, CURLOPT_PASSWORD, signing.password.c_str());
    }
    t->headers = headers;
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_multi_add_handle(multi_, easy);
    ++active_;
  }

  void Finish(Transfer* t, CURLcode rc) {
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
    const int64_t want = static_cast<int64_t>(t->destination.size());
    std::string what;
    absl::StatusCode code = absl::StatusCode::kUnavailable;
    bool transient = false;
    if (rc != CURLE_OK && !t->filled_from_whole_body) {
      if (t->overflow) {
        what = "the server sent more bytes than the range asked for";
        code = absl::StatusCode::kDataLoss;
      } else {
        what = absl::StrCat("libcurl: ", t->error_text[0] != '\0'
                                             ? t->error_text
                                             : curl_easy_strerror(rc));
        transient = IsTransient(rc);
        if (rc == CURLE_OPERATION_TIMEDOUT) {
          code = absl::StatusCode::kDeadlineExceeded;
        }
      }
    } else if (t->head) {
      if (status >= 200 && status < 300 && content_length >= 0) {
        t->content_length = content_length;
        Complete(t, absl::OkStatus());
        return;
      }
      if (status >= 200 && status < 300) {
        what = "the response has no Content-Length";
        code = absl::StatusCode::kUnknown;
      } else {
        what = "the HEAD failed";
        code = CodeOfStatus(status);
        transient = IsTransientStatus(status);
      }
    } else if (status == 200 || status == 206) {
      if (static_cast<int64_t>(t->written) == want) {
        Complete(t, absl::OkStatus());
        return;
      }
      const int64_t total =
          status == 206 ? ContentRangeTotal(t->content_range) : content_length;
      if (total >= 0 && t->offset + want > total) {
        Complete(t, absl::OutOfRangeError(absl::StrCat(
                        "GET ", t->name, " bytes [", t->offset, ", ",
                        t->offset + want, "): the range reaches past the ",
                        "object's end (the object has ", total,
                        " bytes) (HTTP ", status, ")")));
        return;
      }
      what = absl::StrCat("short body: ", t->written, " of ", want, " bytes");
      transient = true;
    } else if (status == 416) {
      const int64_t total = ContentRangeTotal(t->content_range);
      Complete(t, absl::OutOfRangeError(absl::StrCat(
                      "GET ", t->name, " bytes [", t->offset, ", ",
                      t->offset + want, "): the range reaches past the ",
                      "object's end (the object has ",
                      total >= 0 ? absl::StrCat(total) : "an unknown number of",
                      " bytes) (HTTP 416)")));
      return;
    } else {
      what = "the server refused";
      code = CodeOfStatus(status);
      transient = IsTransientStatus(status);
    }
    if (!t->error_body.empty()) {
      absl::StrAppend(&what, ": ", ErrorBodySummary(t->error_body));
    }
    if (transient && t->attempt < options_.max_attempts) {
      const double backoff_ms =
          std::min(absl::ToDoubleMilliseconds(options_.initial_backoff) *
                       std::ldexp(1.0, t->attempt - 1),
                   absl::ToDoubleMilliseconds(options_.max_backoff));
      const double draw =
          JitterDraw(options_.jitter_seed, t->url, t->offset, t->attempt);
      t->retry_at =
          absl::Now() + absl::Milliseconds(backoff_ms * (0.5 + 0.5 * draw));
      waiting_.push_back(t);
      return;
    }
    std::string message =
        t->head ? absl::StrCat("HEAD ", t->name)
                : absl::StrCat("GET ", t->name, " bytes [", t->offset, ", ",
                               t->offset + want, ")");
    if (t->name != t->url) absl::StrAppend(&message, " (", t->url, ")");
    absl::StrAppend(&message, ": ", what);
    if (status != 0) absl::StrAppend(&message, " (HTTP ", status, ")");
    absl::StrAppend(&message, " after ", t->attempt,
                    t->attempt == 1 ? " attempt" : " attempts");
    if (transient) {
      absl::StrAppend(&message, " (max_attempts = ", options_.max_attempts,
                      ")");
    }
    Complete(t, absl::Status(code, message));
  }

  // Records `t`'s outcome in its batch. `t` and its batch may be gone once
  // this returns (the caller wakes up).
  void Complete(Transfer* t, absl::Status status) {
    Batch* batch = t->batch;
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
  std::deque<Transfer*> incoming_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The I/O thread's own.
  std::deque<Transfer*> ready_;
  std::vector<Transfer*> waiting_;  // retries, until their retry_at
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
  if (options.io_threads < 1 || options.io_threads > options.max_in_flight) {
    return invalid(absl::StrCat(
        "io_threads = ", options.io_threads,
        " must be in [1, max_in_flight = ", options.max_in_flight, "]"));
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
  for (int i = 0; i < options.io_threads; ++i) {
    StoreOptions share = options;
    share.max_in_flight = options.max_in_flight / options.io_threads +
                          (i < options.max_in_flight % options.io_threads);
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
  Batch batch;
  batch.signing = &signing;
  std::vector<Transfer> transfers;
  for (const HttpRangeGet& get : gets) {
    const std::string& name = get.name.empty() ? get.url : get.name;
    if (get.offset < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GET ", name, ": the offset ", get.offset, " is negative"));
    }
    const auto size = static_cast<int64_t>(get.destination.size());
    const int64_t step = max_request_bytes_;
    for (int64_t at = 0; at < size; at += step) {
      Transfer& t = transfers.emplace_back();
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
  Batch batch;
  batch.signing = &signing;
  std::vector<Transfer> transfers(1);
  transfers[0].batch = &batch;
  transfers[0].url = url;
  transfers[0].name = name.empty() ? url : name;
  transfers[0].head = true;
  if (absl::Status s = NextEngine().Run(transfers, batch); !s.ok()) return s;
  return transfers[0].content_length;
}

}  // namespace pinwheel::internal
