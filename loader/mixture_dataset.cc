// MixtureDataset: see mixture_dataset.h and its Note [stratified mixing].
#include "loader/mixture_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "loader/internal/random.h"
#include "loader/sampler.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

using internal::Mix64;
using internal::SplitMix64;

// Keys that set the mixture's draws apart from the loader's other uses of
// the same seed.
constexpr uint64_t kInterleaveKey = 0x6d69782d736c6f74ULL;  // "mix-slot"
constexpr uint64_t kSourceKey = 0x6d69782d73726365ULL;      // "mix-srce"
constexpr int64_t kMaxWindow = int64_t{1} << 24;

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("MixtureDataset: ", what));
}

std::string Describe(const FieldSpec& f) {
  return absl::StrCat("'", f.name, "' ", f.ToString(),
                      f.variable_length ? " (variable length)" : "");
}

// Returns OK if `b` (source k's layout) equals `a` (source 0's), else
// InvalidArgument naming source k and the first field that differs.
absl::Status SameLayout(const SampleLayout& a, const SampleLayout& b,
                        size_t k) {
  const size_t n = std::max(a.fields().size(), b.fields().size());
  for (size_t f = 0; f < n; ++f) {
    if (f >= b.fields().size()) {
      return Bad(absl::StrCat("source ", k, " has no field ", f,
                              " (source 0's ", Describe(a.fields()[f]),
                              "): every source must have source 0's layout"));
    }
    if (f >= a.fields().size()) {
      return Bad(absl::StrCat("source ", k, "'s field ", f, " ",
                              Describe(b.fields()[f]),
                              " is not in source 0's layout: every source "
                              "must have source 0's layout"));
    }
    const FieldSpec& x = a.fields()[f];
    const FieldSpec& y = b.fields()[f];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape ||
        x.variable_length != y.variable_length) {
      return Bad(absl::StrCat("source ", k, "'s field ", f, " is ", Describe(y),
                              " but source 0's is ", Describe(x),
                              ": every source must have source 0's layout"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckWeights(const std::vector<double>& weights, size_t sources,
                          absl::string_view name) {
  if (weights.size() != sources) {
    return Bad(absl::StrCat(name, " has ", weights.size(), " weights for ",
                            sources, " sources: one weight per source"));
  }
  double largest = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    if (!std::isfinite(weights[k]) || weights[k] < 0) {
      return Bad(absl::StrCat(name, "[", k, "] (source ", k, ") = ", weights[k],
                              ": must be finite and >= 0"));
    }
    largest = std::max(largest, weights[k]);
  }
  // Any finite weights will do, however large: their sum may overflow, so
  // only their largest is checked (Apportion divides by it first).
  if (!(largest > 0)) {
    return Bad(absl::StrCat(name, " sum to 0: at least one must be > 0"));
  }
  return absl::OkStatus();
}

// One phase of the schedule: the window's slot table and what it implies.
struct PhaseTable {
  // Where the phase starts: first_position is a multiple of the window.
  int64_t first_epoch = 0;
  int64_t first_position = 0;
  std::vector<int64_t> quota;         // per source, sums to the window
  std::vector<int32_t> source;        // per slot
  std::vector<int32_t> rank;          // per slot: its source's r-th slot
  std::vector<int64_t> per_epoch;     // draws per source in one epoch
  std::vector<int64_t> prefix_rest;   // per source, in a short last window
  std::vector<int64_t> draws_before;  // per source, before the phase
};

// Largest-remainder apportionment of `window` slots by `weights`.
std::vector<int64_t> Apportion(const std::vector<double>& weights,
                               int64_t window) {
  // Each weight over the largest first: finite weights of any size (1e308
  // twice) sum without overflow, to at most the number of sources.
  const double largest = *std::max_element(weights.begin(), weights.end());
  double sum = 0;
  for (double w : weights) sum += w / largest;
  std::vector<int64_t> quota(weights.size());
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    const double exact =
        static_cast<double>(window) * (weights[k] / largest / sum);
    quota[k] = std::min<int64_t>(window, static_cast<int64_t>(exact));
    given += quota[k];
    if (weights[k] > 0) {
      remainders.push_back({exact - static_cast<double>(quota[k]), k});
    }
  }
  std::stable_sort(
      remainders.begin(), remainders.end(),
      [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < window; ++i) {
    ++quota[remainders[i % remainders.size()].second];
    ++given;
  }
  // Rounding can only overshoot by giving nothing here; the floors never
  // sum past the window (each <= its exact share up to rounding).
  return quota;
}

PhaseTable MakeTable(int64_t first_epoch, const std::vector<double>& weights,
                     int64_t window, int64_t per_epoch_positions) {
  PhaseTable t;
  t.first_epoch = first_epoch;
  t.quota = Apportion(weights, window);
  const size_t k_count = t.quota.size();
  t.source.resize(static_cast<size_t>(window));
  t.rank.resize(static_cast<size_t>(window));
  std::vector<int64_t> used(k_count, 0);
  // Earliest deadline first: source k's next slot aims at
  // (used_k + 1/2) / q_k of the window; ties go to the lower source.
  for (int64_t i = 0; i < window; ++i) {
    size_t best = k_count;
    for (size_t k = 0; k < k_count; ++k) {
      if (used[k] >= t.quota[k]) continue;
      if (best == k_count || (2 * used[k] + 1) * t.quota[best] <
                                 (2 * used[best] + 1) * t.quota[k]) {
        best = k;
      }
    }
    t.source[static_cast<size_t>(i)] = static_cast<int32_t>(best);
    t.rank[static_cast<size_t>(i)] = static_cast<int32_t>(used[best]++);
  }
  const int64_t whole = per_epoch_positions / window;
  const int64_t rest = per_epoch_positions % window;
  t.per_epoch.assign(k_count, 0);
  for (size_t k = 0; k < k_count; ++k) t.per_epoch[k] = whole * t.quota[k];
  t.prefix_rest.assign(k_count, 0);
  for (int64_t i = 0; i < rest; ++i) {
    ++t.per_epoch[static_cast<size_t>(t.source[static_cast<size_t>(i)])];
    ++t.prefix_rest[static_cast<size_t>(t.source[static_cast<size_t>(i)])];
  }
  return t;
}

// Returns source k's draws under table `t` between window-aligned position
// `from` and `to` (window-aligned, or the epoch's end) of one epoch.
int64_t DrawsWithin(const PhaseTable& t, size_t k, int64_t from, int64_t to,
                    int64_t window, int64_t epoch_length) {
  if (to == epoch_length) {
    const int64_t aligned = to - to % window;
    return (aligned - from) / window * t.quota[k] + t.prefix_rest[k];
  }
  return (to - from) / window * t.quota[k];
}

// Returns source k's draws under table `t` from its start to window-aligned
// (epoch, position).
int64_t DrawsSincePhase(const PhaseTable& t, size_t k, int64_t epoch,
                        int64_t position, int64_t window,
                        int64_t epoch_length) {
  if (epoch == t.first_epoch) {
    return DrawsWithin(t, k, t.first_position, position, window, epoch_length);
  }
  return DrawsWithin(t, k, t.first_position, epoch_length, window,
                     epoch_length) +
         (epoch - t.first_epoch - 1) * t.per_epoch[k] +
         DrawsWithin(t, k, 0, position, window, epoch_length);
}

class MixtureOrder final : public IndexSampler {
 public:
  MixtureOrder(std::vector<int64_t> offsets, std::vector<PhaseTable> phases,
               const MixtureOptions& options, int64_t samples_per_epoch)
      : offsets_(std::move(offsets)),
        phases_(std::move(phases)),
        samples_per_epoch_(samples_per_epoch),
        window_(options.window),
        random_(options.interleave == MixtureOptions::Interleave::kRandom),
        with_replacement_(options.draw ==
                          MixtureOptions::Draw::kWithReplacement),
        shuffle_sources_(options.shuffle_sources) {}

  int64_t size() const override { return samples_per_epoch_; }
  int64_t dataset_size() const override { return offsets_.back(); }
  int num_sources() const override {
    return static_cast<int>(offsets_.size()) - 1;
  }
  int SourceOf(int64_t index) const override {
    return static_cast<int>(
        std::upper_bound(offsets_.begin(), offsets_.end(), index) -
        offsets_.begin() - 1);
  }

  int64_t At(uint64_t seed, int64_t epoch, int64_t position) const override {
    const PhaseTable& t = PhaseFor(epoch, position);
    const int64_t w = position / window_;
    const int64_t i = position % window_;
    int64_t slot = i;
    if (random_) {
      const int64_t length =
          std::min(window_, samples_per_epoch_ - w * window_);
      slot = EpochShuffle(length,
                          SplitMix64(seed ^ kInterleaveKey ^
                                     SplitMix64(static_cast<uint64_t>(epoch))),
                          w)
                 .At(i);
    }
    const auto k = static_cast<size_t>(t.source[static_cast<size_t>(slot)]);
    // Source k's draw number over the whole run: Note [stratified mixing].
    const int64_t j =
        t.draws_before[k] +
        DrawsSincePhase(t, k, epoch, w * window_, window_, samples_per_epoch_) +
        t.rank[static_cast<size_t>(slot)];
    const int64_t n = offsets_[k + 1] - offsets_[k];
    const uint64_t source_seed = SplitMix64(seed ^ kSourceKey ^ SplitMix64(k));
    int64_t local = 0;
    if (with_replacement_) {
      internal::SplitMix64Stream draw(
          Mix64(source_seed ^ SplitMix64(static_cast<uint64_t>(j))));
      local = static_cast<int64_t>(draw.Bounded(static_cast<uint64_t>(n)));
    } else if (shuffle_sources_) {
      local = EpochShuffle(n, source_seed, j / n).At(j % n);
    } else {
      local = j % n;
    }
    return offsets_[k] + local;
  }

  // Returns the phase of `epoch`: the last that starts at or before it
  // (phases_[0] starts at 0).
  const PhaseTable& PhaseFor(int64_t epoch, int64_t position) const {
    return *(
        std::upper_bound(
            phases_.begin(), phases_.end(), std::make_pair(epoch, position),
            [](const std::pair<int64_t, int64_t>& at, const PhaseTable& p) {
              return at < std::make_pair(p.first_epoch, p.first_position);
            }) -
        1);
  }

 private:
  const std::vector<int64_t> offsets_;
  const std::vector<PhaseTable> phases_;
  const int64_t samples_per_epoch_;
  const int64_t window_;
  const bool random_;
  const bool with_replacement_;
  const bool shuffle_sources_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<MixtureDataset>> MixtureDataset::Create(
    std::vector<std::shared_ptr<const Dataset>> sources,
    MixtureOptions options) {
  if (sources.empty()) return Bad("no sources: give at least one dataset");
  std::vector<int64_t> offsets = {0};
  for (size_t k = 0; k < sources.size(); ++k) {
    if (sources[k] == nullptr) {
      return Bad(absl::StrCat("source ", k, " is null"));
    }
    const int64_t n = sources[k]->size();
    if (n < 0) {
      return Bad(
          absl::StrCat("source ", k, "'s size() = ", n, ": must be >= 0"));
    }
    if (k > 0) {
      PINWHEEL_RETURN_IF_ERROR(
          SameLayout(sources[0]->layout(), sources[k]->layout(), k));
    }
    offsets.push_back(offsets.back() + n);
  }
  PINWHEEL_RETURN_IF_ERROR(
      CheckWeights(options.weights, sources.size(), "weights"));
  if (options.window < 1 || options.window > kMaxWindow) {
    return Bad(
        absl::StrCat("window = ", options.window, ": must be in 1..2^24"));
  }
  const int64_t per_epoch = options.samples_per_epoch == -1
                                ? offsets.back()
                                : options.samples_per_epoch;
  if (per_epoch < 1) {
    return Bad(absl::StrCat(
        "samples_per_epoch = ", options.samples_per_epoch,
        options.samples_per_epoch == -1 ? " (the sources hold no sample)" : "",
        ": must be >= 1"));
  }
  std::vector<PhaseTable> phases;
  phases.push_back(MakeTable(0, options.weights, options.window, per_epoch));
  std::pair<int64_t, int64_t> previous = {0, 0};
  for (size_t s = 0; s < options.schedule.size(); ++s) {
    const MixtureOptions::Phase& phase = options.schedule[s];
    PINWHEEL_RETURN_IF_ERROR(
        CheckWeights(phase.weights, sources.size(),
                     absl::StrCat("schedule[", s, "].weights")));
    std::pair<int64_t, int64_t> at = {phase.first_epoch, 0};
    if (phase.first_sample >= 0) {
      at = {phase.first_sample / per_epoch, phase.first_sample % per_epoch};
      if (at.second % options.window != 0) {
        return Bad(absl::StrCat(
            "schedule[", s, "].first_sample = ", phase.first_sample,
            " is position ", at.second, " of epoch ", at.first,
            ": a phase must start at a window boundary (a multiple of window "
            "= ",
            options.window, " in the epoch of samples_per_epoch = ", per_epoch,
            ")"));
      }
    }
    if (at <= previous) {
      return Bad(absl::StrCat(
          "schedule[", s, "] starts at epoch ", at.first, " position ",
          at.second, " (first_epoch = ", phase.first_epoch,
          ", first_sample = ", phase.first_sample, "): must be after epoch ",
          previous.first, " position ", previous.second,
          " (phases start after sample 0, in order)"));
    }
    previous = at;
    PhaseTable table =
        MakeTable(at.first, phase.weights, options.window, per_epoch);
    table.first_position = at.second;
    phases.push_back(std::move(table));
  }
  for (size_t p = 0; p < phases.size(); ++p) {
    std::vector<int64_t>& before = phases[p].draws_before;
    before.assign(sources.size(), 0);
    if (p > 0) {
      const PhaseTable& last = phases[p - 1];
      for (size_t k = 0; k < sources.size(); ++k) {
        before[k] = last.draws_before[k] +
                    DrawsSincePhase(last, k, phases[p].first_epoch,
                                    phases[p].first_position, options.window,
                                    per_epoch);
      }
    }
    for (size_t k = 0; k < sources.size(); ++k) {
      if (phases[p].quota[k] > 0 && offsets[k + 1] == offsets[k]) {
        return Bad(absl::StrCat(
            "source ", k, " has no sample but weight ",
            p == 0 ? options.weights[k] : options.schedule[p - 1].weights[k],
            p == 0 ? "" : absl::StrCat(" in schedule[", p - 1, "]"),
            ": give it weight 0 or samples"));
      }
    }
  }
  std::shared_ptr<MixtureDataset> mix(new MixtureDataset());
  mix->order_ = std::make_shared<MixtureOrder>(offsets, std::move(phases),
                                               options, per_epoch);
  mix->sources_ = std::move(sources);
  mix->offsets_ = std::move(offsets);
  return mix;
}

int MixtureDataset::SourceOf(int64_t index) const {
  return order_->SourceOf(index);
}

absl::Status MixtureDataset::Read(int64_t index, SampleView& out) const {
  if (index < 0 || index >= size()) {
    return absl::OutOfRangeError(absl::StrCat("MixtureDataset: index ", index,
                                              " is outside [0, ", size(), ")"));
  }
  const int k = SourceOf(index);
  return sources_[static_cast<size_t>(k)]->Read(
      index - offsets_[static_cast<size_t>(k)], out);
}

std::vector<int64_t> MixtureDataset::Quotas(int64_t epoch,
                                            int64_t position) const {
  return static_cast<const MixtureOrder&>(*order_)
      .PhaseFor(epoch, position)
      .quota;
}

}  // namespace pinwheel
