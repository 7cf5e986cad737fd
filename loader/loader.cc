#include "loader/loader.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "loader/pipeline/loader_core.h"
#include "loader/telemetry/stats_reporter.h"

namespace pinwheel {

Loader::Loader(std::unique_ptr<internal::LoaderCore> core)
    : core_(std::move(core)) {}
Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&& other) noexcept {
  if (this != &other) {
    StopReporter();  // it reads core_, which is about to go
    core_ = std::move(other.core_);
    cpu_budget_ = std::move(other.cpu_budget_);
    num_workers_ = other.num_workers_;
    cpu_warning_ = std::move(other.cpu_warning_);
    reporter_ = std::move(other.reporter_);
    reporter_status_ = std::move(other.reporter_status_);
  }
  return *this;
}
Loader::~Loader() { StopReporter(); }

void Loader::StopReporter() {
  if (reporter_ == nullptr) return;
  if (core_ != nullptr) reporter_->Stop(core_->ConsumerStats());
  reporter_status_ = reporter_->status();
  reporter_.reset();
}

namespace {

absl::Status MovedFrom(absl::string_view call) {
  return absl::FailedPreconditionError(
      absl::StrCat(call, " on a moved-from Loader"));
}

}  // namespace

absl::StatusOr<std::optional<DeviceBatch>> Loader::Next() {
  if (!core_) return MovedFrom("Next()");
  absl::StatusOr<std::optional<DeviceBatch>> next = core_->Next();
  if (reporter_ != nullptr) {
    reporter_->AfterNext(next.ok() && next->has_value(),
                         [this] { return core_->ConsumerStats(); });
  }
  return next;
}
absl::Status Loader::StartEpoch(int64_t epoch) {
  if (!core_) return MovedFrom("StartEpoch()");
  return core_->StartEpoch(epoch);
}
int64_t Loader::epoch() const { return core_ ? core_->epoch() : -1; }
int64_t Loader::batches_per_epoch() const {
  return core_ ? core_->batches_per_epoch() : -1;
}
const BatchLayout& Loader::layout() const {
  static const BatchLayout kEmpty;
  return core_ ? core_->layout() : kEmpty;
}
const BatchLayout& Loader::input_layout() const {
  static const BatchLayout kEmpty;
  return core_ ? core_->input_layout() : kEmpty;
}
const Device& Loader::device() const {
  static const Device kHost = Device::Host();
  return core_ ? core_->device() : kHost;
}
LoaderStats Loader::stats() const {
  if (!core_) return LoaderStats();
  LoaderStats stats = core_->stats();
  stats.cpu_budget = cpu_budget_;
  stats.num_workers = num_workers_;
  stats.cpu_warning = cpu_warning_;
  return stats;
}
absl::StatusOr<LoaderCheckpoint> Loader::Checkpoint() const {
  if (!core_) return MovedFrom("Checkpoint()");
  return core_->Checkpoint();
}
void Loader::Shutdown() {
  StopReporter();
  if (core_) core_->Shutdown();
}
absl::Status Loader::shutdown_status() const {
  return core_ ? core_->shutdown_status() : absl::OkStatus();
}
absl::Status Loader::stats_report_status() const {
  if (reporter_ != nullptr) return reporter_->status();
  return reporter_status_;
}

Loader::Iterator Loader::begin() { return Iterator(this); }

void Loader::Iterator::Advance() {
  if (failed_) {
    done_ = true;
    return;
  }
  // Let go of the batch yielded last before asking for the next: with
  // device_buffers(1) it holds the only buffer.
  if (current_.ok() && !current_->released()) {
    absl::Status released = current_->Release();
    if (!released.ok()) {
      current_ = released;
      failed_ = true;
      return;
    }
  }
  absl::StatusOr<std::optional<DeviceBatch>> next = loader_->Next();
  if (!next.ok()) {
    current_ = next.status();
    failed_ = true;  // yield the error once, then end
    return;
  }
  if (!next->has_value()) {
    done_ = true;
    return;
  }
  current_ = std::move(**next);
}

}  // namespace pinwheel
