#include "loader/storage/cache/internal/plan_index.h"

#include <algorithm>

namespace pinwheel::internal {

void PlanIndex::Append(BlockKey key, int32_t stream, int64_t epoch) {
  const auto last = last_appended_.find(stream);
  if (last != last_appended_.end()) {
    const Entry& previous = entries_[static_cast<size_t>(last->second)];
    if (previous.key == key && previous.epoch == epoch && !previous.consumed) {
      return;
    }
  }
  const int64_t position = size();
  entries_.push_back({key, stream, epoch, false});
  uses_[key].positions.push_back(position);
  last_appended_[stream] = position;
}

bool PlanIndex::IsCurrent(BlockKey key) const {
  for (const auto& [stream, position] : current_) {
    if (entries_[static_cast<size_t>(position)].key == key) return true;
  }
  return false;
}

PlanIndex::Match PlanIndex::Touch(BlockKey key, int64_t* position) {
  if (IsCurrent(key)) return Match::kCurrent;
  const auto it = uses_.find(key);
  if (it == uses_.end()) return Match::kUnplanned;
  Uses& uses = it->second;
  while (uses.first < uses.positions.size() &&
         entries_[static_cast<size_t>(uses.positions[uses.first])].consumed) {
    ++uses.first;
  }
  if (uses.first == uses.positions.size()) return Match::kUnplanned;
  const int64_t found = uses.positions[uses.first];
  if (found >= cursor_ + window_) return Match::kUnplanned;
  Consume(found);
  current_[entries_[static_cast<size_t>(found)].stream] = found;
  // Positions far behind the one just read were passed over.
  while (cursor_ < found - window_) {
    if (!entries_[static_cast<size_t>(cursor_)].consumed) {
      entries_[static_cast<size_t>(cursor_)].consumed = true;
      ++skipped_;
    }
    ++cursor_;
  }
  while (cursor_ < size() && entries_[static_cast<size_t>(cursor_)].consumed) {
    ++cursor_;
  }
  *position = found;
  return Match::kPlanned;
}

void PlanIndex::Consume(int64_t position) {
  entries_[static_cast<size_t>(position)].consumed = true;
}

int64_t PlanIndex::NextUse(BlockKey key, int64_t from) const {
  const auto it = uses_.find(key);
  if (it == uses_.end()) return kNever;
  const std::vector<int64_t>& positions = it->second.positions;
  auto p = std::lower_bound(
      positions.begin() + static_cast<std::ptrdiff_t>(it->second.first),
      positions.end(), from);
  for (; p != positions.end(); ++p) {
    if (!entries_[static_cast<size_t>(*p)].consumed) return *p;
  }
  return kNever;
}

int64_t PlanIndex::cursor_epoch() const {
  if (entries_.empty()) return -1;
  if (cursor_ >= size()) return entries_.back().epoch;
  return entries_[static_cast<size_t>(cursor_)].epoch;
}

}  // namespace pinwheel::internal
