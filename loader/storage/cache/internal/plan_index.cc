#include "loader/storage/cache/internal/plan_index.h"

#include <algorithm>

namespace pinwheel::internal {

void PlanIndex::Append(BlockKey key, int32_t stream, int64_t epoch,
                       bool exact) {
  Stream& s = streams_[stream];
  if (!exact && !s.positions.empty()) {
    const Entry& previous = entries_[static_cast<size_t>(s.positions.back())];
    if (previous.key == key && previous.epoch == epoch && !previous.consumed &&
        !previous.exact) {
      return;
    }
  }
  const int64_t position = size();
  entries_.push_back({key, stream, epoch,
                      static_cast<int64_t>(s.positions.size()), false, exact});
  s.positions.push_back(position);
  uses_[key].positions.push_back(position);
}

bool PlanIndex::IsCurrent(BlockKey key) const {
  for (const auto& [id, stream] : streams_) {
    if (stream.current >= 0 &&
        entries_[static_cast<size_t>(stream.current)].key == key) {
      return true;
    }
  }
  return false;
}

PlanIndex::Match PlanIndex::Touch(BlockKey key, int64_t* position) {
  const auto it = uses_.find(key);
  Uses* uses = it == uses_.end() ? nullptr : &it->second;
  int64_t found = -1;  // the first unconsumed position of `key`, if near
  if (uses != nullptr) {
    while (
        uses->first < uses->positions.size() &&
        entries_[static_cast<size_t>(uses->positions[uses->first])].consumed) {
      ++uses->first;
    }
    if (uses->first < uses->positions.size()) {
      const int64_t first = uses->positions[uses->first];
      const Entry& entry = entries_[static_cast<size_t>(first)];
      const Stream& stream = streams_[entry.stream];
      if (entry.local < static_cast<int64_t>(stream.next) + window_) {
        found = first;
      }
    }
  }
  if (found >= 0 && entries_[static_cast<size_t>(found)].exact) {
    return ConsumeFor(found, position);
  }
  if (IsCurrent(key)) return Match::kCurrent;
  if (found < 0) return Match::kUnplanned;
  return ConsumeFor(found, position);
}

PlanIndex::Match PlanIndex::ConsumeFor(int64_t found, int64_t* position) {
  const Entry& entry = entries_[static_cast<size_t>(found)];
  Stream& stream = streams_[entry.stream];
  Consume(found);
  // An exact read is over when it returns: its block is nobody's current
  // one (else every batch's last block would stay held, as if being read).
  stream.current = entry.exact ? -1 : found;
  // The stream's positions far behind the one just read were passed over.
  for (size_t i = stream.next; static_cast<int64_t>(i) < entry.local - window_;
       ++i) {
    Entry& passed = entries_[static_cast<size_t>(stream.positions[i])];
    if (!passed.consumed) {
      passed.consumed = true;
      ++skipped_;
    }
  }
  while (
      stream.next < stream.positions.size() &&
      entries_[static_cast<size_t>(stream.positions[stream.next])].consumed) {
    ++stream.next;
  }
  AdvanceCursor();
  *position = found;
  return Match::kPlanned;
}

void PlanIndex::Consume(int64_t position) {
  entries_[static_cast<size_t>(position)].consumed = true;
}

void PlanIndex::AdvanceCursor() {
  while (cursor_ < size() && entries_[static_cast<size_t>(cursor_)].consumed) {
    ++cursor_;
  }
}

void PlanIndex::SkipEpochsBefore(int64_t epoch) {
  for (int64_t p = cursor_; p < size(); ++p) {
    Entry& entry = entries_[static_cast<size_t>(p)];
    if (!entry.consumed && entry.epoch < epoch) {
      entry.consumed = true;
      ++skipped_;
    }
  }
  for (auto& [id, stream] : streams_) {
    if (stream.current >= 0 &&
        entries_[static_cast<size_t>(stream.current)].epoch < epoch) {
      stream.current = -1;
    }
    while (
        stream.next < stream.positions.size() &&
        entries_[static_cast<size_t>(stream.positions[stream.next])].consumed) {
      ++stream.next;
    }
  }
  AdvanceCursor();
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
