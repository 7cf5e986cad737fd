#include "loader/loader.h"

#include <utility>

#include "loader/internal/loader_core.h"

namespace pinwheel {

Loader::Loader(std::unique_ptr<internal::LoaderCore> core)
    : core_(std::move(core)) {}
Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&&) noexcept = default;
Loader::~Loader() = default;

absl::StatusOr<std::optional<DeviceBatch>> Loader::Next() {
  return core_->Next();
}
absl::Status Loader::StartEpoch(int64_t epoch) {
  return core_->StartEpoch(epoch);
}
int64_t Loader::epoch() const { return core_->epoch(); }
int64_t Loader::batches_per_epoch() const { return core_->batches_per_epoch(); }
const BatchLayout& Loader::layout() const { return core_->layout(); }
const Device& Loader::device() const { return core_->device(); }
LoaderStats Loader::stats() const { return core_->stats(); }
absl::StatusOr<LoaderCheckpoint> Loader::Checkpoint() const {
  return core_->Checkpoint();
}
void Loader::Shutdown() {
  if (core_) core_->Shutdown();
}

Loader::Iterator Loader::begin() { return Iterator(this); }

void Loader::Iterator::Advance() {
  if (failed_) {
    done_ = true;
    return;
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
