// Issue 22 item 5 on the C++ side of the package: the Python classes in
// pinwheel/__init__.py (WeightedRandomSampler, ClassBalancedSampler,
// Sampler, MixtureDataset, PackedTokens) check every argument first, naming
// it; the checks here are the C++ factories' (WeightedRandomSampler::Create,
// MixtureDataset::Create, PackedTokenDataset::Open), whose errors name the
// option too.
#include "samples/python/ext/py_mixtures.h"

#include <cstdint>
#include <memory>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

#include "loader/mixture_dataset.h"
#include "loader/packed_token_dataset.h"
#include "loader/weighted_sampler.h"
#include "pinning/base/mutex.h"
#include "samples/python/ext/py_datasets.h"
#include "samples/python/ext/py_support.h"

namespace pinwheel::python {
namespace {

using namespace nb::literals;

using Doubles =
    nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Int64s =
    nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// A sampler whose At() calls Python: index_many(seed, epoch, positions)
// -> the indices at those global positions (pinwheel.Sampler's at_many(),
// by default at() per position). The contract of loader/index_sampler.h is
// the caller's to keep (a pure function); size() and dataset_size() are
// fixed at creation, so that the loader never needs the GIL for them.
// Thread-safe: Python is called with the GIL held, the cache under mu_.
//
// Note [Python sampler blocks]
// Taking the GIL once per position made a loader with workers crawl: the
// worker waits for the consumer's thread to give the GIL up (the switch
// interval, 5 ms) at every sample (measured on the shared 2-core machine:
// 48.6 us a sample with 2 workers, against 2.4 us with none). So a miss
// asks Python for a block of kBlock positions at once: p, p + d, ...,
// with d the step between the last two calls (a rank of W reads every
// W-th global position), and keeps the answers for the calls that follow.
// Since At() is a pure function, a cached answer is the answer (measured
// the same way, 200,000 samples of batch 1024 and an at() of one line: 0.8
// us a sample with 0 or 2 workers, against 0.16 and 0.10 us for the C++
// WeightedRandomSampler, with load average 9 on the machine). When a
// block fails (an exception at one of its positions), its positions are
// asked one at a time up to the first that fails, so an error is reported
// at its own position (the loader delivers it as Internal, with the
// Python exception's type and message).
class PythonSampler final : public IndexSampler {
 public:
  static constexpr int64_t kBlock = 256;

  PythonSampler(int64_t size, int64_t dataset_size, nb::object index_many)
      : size_(size),
        dataset_size_(dataset_size),
        index_many_(std::move(index_many)) {}

  int64_t size() const override { return size_; }
  int64_t dataset_size() const override { return dataset_size_; }
  int64_t At(uint64_t seed, int64_t epoch, int64_t position) const override {
    int64_t step = 1;
    {
      internal::MutexLock lock(&mu_);
      if (seed == seed_ && epoch == epoch_) {
        auto it = cache_.find(position);
        if (it != cache_.end()) {
          const int64_t index = it->second;
          cache_.erase(it);
          last_ = position;
          return index;
        }
        if (last_ >= 0 && position > last_) step = position - last_;
      }
      last_ = position;
    }
    std::vector<int64_t> positions;
    for (int64_t p = position; p < size_ && positions.size() < kBlock;
         p += step) {
      positions.push_back(p);
      if (p > size_ - step) break;  // p + step would overflow or pass size_
    }
    std::vector<int64_t> indices;
    absl::Status status = Ask(seed, epoch, positions, indices);
    if (!status.ok() && positions.size() > 1) {
      // Note [Python sampler blocks]: one position at a time, up to the
      // first that fails; p's own failure is the one reported.
      std::vector<int64_t> one(1);
      std::vector<int64_t> answered;
      size_t k = 0;
      for (; k < positions.size(); ++k) {
        one[0] = positions[k];
        status = Ask(seed, epoch, one, indices);
        if (!status.ok()) break;
        answered.push_back(indices[0]);
      }
      if (k > 0) status = absl::OkStatus();
      positions.resize(k);
      indices = std::move(answered);
    }
    if (!status.ok()) throw StatusError(std::move(status));
    internal::MutexLock lock(&mu_);
    if (seed != seed_ || epoch != epoch_ || cache_.size() > 4 * kBlock) {
      cache_.clear();
      seed_ = seed;
      epoch_ = epoch;
    }
    for (size_t k = 1; k < positions.size(); ++k) {
      cache_[positions[k]] = indices[k];
    }
    return indices[0];
  }

 private:
  // Writes the indices at `positions` into `indices`, or returns why not.
  absl::Status Ask(uint64_t seed, int64_t epoch,
                   const std::vector<int64_t>& positions,
                   std::vector<int64_t>& indices) const {
    if (PythonFinalizing()) {
      return absl::CancelledError("the Python interpreter is shutting down");
    }
    nb::gil_scoped_acquire gil;
    try {
      nb::list asked;
      for (int64_t p : positions) asked.append(p);
      nb::object result = index_many_.get()(seed, epoch, asked);
      indices.clear();
      for (nb::handle item : result) {
        int64_t index = 0;
        if (!PyLong_Check(item.ptr()) || !nb::try_cast(item, index)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "at_many() gave ", nb::cast<std::string>(nb::repr(item)),
              ": every index must be an int"));
        }
        indices.push_back(index);
      }
      if (indices.size() != positions.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("at_many() gave ", indices.size(), " indices for ",
                         positions.size(), " positions"));
      }
      return absl::OkStatus();
    } catch (nb::python_error& e) {
      const std::string type =
          nb::cast<std::string>(nb::handle(e.type()).attr("__name__"));
      return absl::Status(StatusCodeOfPython(e),
                          absl::StrCat(type, ": ", TextFromPython(e.value())));
    }
  }

  int64_t size_;
  int64_t dataset_size_;
  PyRef index_many_;
  mutable absl::Mutex mu_;
  // The answers of the last blocks for (seed_, epoch_), by position.
  mutable std::unordered_map<int64_t, int64_t> cache_ ABSL_GUARDED_BY(mu_);
  mutable uint64_t seed_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int64_t epoch_ ABSL_GUARDED_BY(mu_) = -1;
  mutable int64_t last_ ABSL_GUARDED_BY(mu_) = -1;  // the last position asked
};

// Returns `handle`'s dataset as a MixtureDataset, or InvalidArgument.
std::shared_ptr<const MixtureDataset> AsMixture(const DatasetHandle& handle) {
  auto mixture =
      std::dynamic_pointer_cast<const MixtureDataset>(handle.dataset);
  if (mixture == nullptr) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat(handle.description, " is not a MixtureDataset")));
  }
  return mixture;
}

// One phase of a weight schedule: (first_epoch, first_sample, weights).
using PyPhase = std::tuple<int64_t, int64_t, std::vector<double>>;

DatasetHandle MakeMixture(const std::vector<const DatasetHandle*>& sources,
                          std::vector<double> weights,
                          const std::vector<PyPhase>& schedule,
                          int64_t samples_per_epoch, int64_t window,
                          const std::string& interleave,
                          const std::string& draw, bool shuffle_sources) {
  std::vector<std::shared_ptr<const Dataset>> datasets;
  for (size_t k = 0; k < sources.size(); ++k) {
    if (sources[k] == nullptr || sources[k]->dataset == nullptr) {
      throw StatusError(absl::InvalidArgumentError(absl::StrCat(
          "MixtureDataset: sources[", k,
          "] is not a map-style dataset (an IterableDataset or TarShards "
          "has no index to mix by)")));
    }
    datasets.push_back(sources[k]->dataset);
  }
  MixtureOptions options;
  options.weights = std::move(weights);
  for (const auto& [first_epoch, first_sample, phase_weights] : schedule) {
    options.schedule.push_back({.first_epoch = first_epoch,
                                .weights = phase_weights,
                                .first_sample = first_sample});
  }
  options.samples_per_epoch = samples_per_epoch;
  options.window = window;
  if (interleave == "stratified") {
    options.interleave = MixtureOptions::Interleave::kStratified;
  } else if (interleave == "random") {
    options.interleave = MixtureOptions::Interleave::kRandom;
  } else {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("MixtureDataset: interleave = '", interleave,
                     "': must be 'stratified' or 'random'")));
  }
  if (draw == "source_epochs") {
    options.draw = MixtureOptions::Draw::kSourceEpochs;
  } else if (draw == "with_replacement") {
    options.draw = MixtureOptions::Draw::kWithReplacement;
  } else {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("MixtureDataset: draw = '", draw,
                     "': must be 'source_epochs' or 'with_replacement'")));
  }
  options.shuffle_sources = shuffle_sources;
  std::shared_ptr<MixtureDataset> mixture = ValueOrThrow(
      MixtureDataset::Create(std::move(datasets), std::move(options)));
  return {mixture, nullptr,
          absl::StrCat("MixtureDataset(", sources.size(), " sources)")};
}

DatasetHandle OpenPackedTokens(const std::string& path, int64_t seq_len,
                               int token_bytes, bool signed_tokens,
                               int64_t eos_id, const std::string& offsets_path,
                               int64_t pad_id, int64_t ignore_index) {
  std::shared_ptr<PackedTokenDataset> packed = ValueOrThrow(
      PackedTokenDataset::Open(path, {.token_bytes = token_bytes,
                                      .signed_tokens = signed_tokens,
                                      .seq_len = seq_len,
                                      .eos_id = eos_id,
                                      .offsets_path = offsets_path,
                                      .pad_id = pad_id,
                                      .ignore_index = ignore_index}));
  return {packed, nullptr, absl::StrCat("PackedTokens(", path, ")")};
}

}  // namespace

void BindMixtures(nb::module_& m) {
  nb::class_<SamplerHandle>(m, "_Sampler",
                            "A custom data order (see pinwheel.Sampler, "
                            "pinwheel.WeightedRandomSampler, ...).")
      .def_prop_ro(
          "size", [](const SamplerHandle& s) { return s.sampler->size(); },
          "Positions in every epoch's global order.")
      .def_prop_ro(
          "dataset_size",
          [](const SamplerHandle& s) { return s.sampler->dataset_size(); },
          "The size of the dataset it was made for (-1: any).")
      .def_prop_ro(
          "num_sources",
          [](const SamplerHandle& s) { return s.sampler->num_sources(); },
          "Sources it names for stats()['samples_per_source'] (0: none).")
      .def(
          "at",
          [](const SamplerHandle& s, uint64_t seed, int64_t epoch,
             int64_t position) {
            if (epoch < 0 || position < 0 || position >= s.sampler->size()) {
              throw StatusError(absl::OutOfRangeError(
                  absl::StrCat("epoch ", epoch, ", position ", position,
                               ": needs epoch >= 0 and 0 <= position < ",
                               s.sampler->size())));
            }
            nb::gil_scoped_release nogil;  // a Python sampler takes it
            return s.sampler->At(seed, epoch, position);
          },
          "seed"_a, "epoch"_a, "position"_a,
          "The dataset index at global `position` of `epoch`'s order.")
      .def("__repr__", [](const SamplerHandle& s) { return s.description; });

  m.def(
      "weighted_random_sampler",
      [](Doubles weights, int64_t num_samples) {
        nb::gil_scoped_release nogil;  // O(n) table
        std::shared_ptr<const IndexSampler> s =
            ValueOrThrow(WeightedRandomSampler::Create(
                absl::MakeConstSpan(weights.data(), weights.shape(0)),
                num_samples));
        return SamplerHandle{
            s, absl::StrCat("WeightedRandomSampler(", s->size(), " draws over ",
                            s->dataset_size(), " indices)")};
      },
      "weights"_a, "num_samples"_a = -1,
      "Draws index i with probability weights[i] / sum(weights), with "
      "replacement, num_samples per epoch (-1: len(weights)).");
  m.def(
      "class_balanced_sampler",
      [](Int64s labels, int64_t num_samples) {
        nb::gil_scoped_release nogil;
        std::shared_ptr<const IndexSampler> s =
            ValueOrThrow(ClassBalancedSampler::Create(
                absl::MakeConstSpan(labels.data(), labels.shape(0)),
                num_samples));
        return SamplerHandle{
            s, absl::StrCat("ClassBalancedSampler(", s->size(), " draws over ",
                            s->dataset_size(), " indices)")};
      },
      "labels"_a, "num_samples"_a = -1,
      "Draws classes uniformly, and within a class its indices uniformly, "
      "with replacement.");
  m.def(
      "python_sampler",
      [](int64_t size, int64_t dataset_size, nb::object index_many) {
        if (size < 0 || dataset_size < -1) {
          throw StatusError(absl::InvalidArgumentError(absl::StrCat(
              "Sampler: size = ", size, ", dataset_size = ", dataset_size,
              ": need size >= 0 and "
              "dataset_size >= -1")));
        }
        if (!PyCallable_Check(index_many.ptr())) {
          throw StatusError(absl::InvalidArgumentError(
              "Sampler: index_many must be callable"));
        }
        return SamplerHandle{std::make_shared<PythonSampler>(
                                 size, dataset_size, std::move(index_many)),
                             absl::StrCat("Sampler(", size, " positions)")};
      },
      "size"_a, "dataset_size"_a, "index_many"_a,
      "A sampler whose index_many(seed, epoch, positions) -> indices is "
      "Python code.");

  m.def("mixture_dataset", &MakeMixture, "sources"_a, "weights"_a, "schedule"_a,
        "samples_per_epoch"_a, "window"_a, "interleave"_a, "draw"_a,
        "shuffle_sources"_a,
        "K map-style datasets of one layout mixed by weight "
        "(loader/mixture_dataset.h); schedule phases are (first_epoch, "
        "first_sample, weights).");
  m.def(
      "_mixture_order",
      [](const DatasetHandle& d) {
        std::shared_ptr<const MixtureDataset> mixture = AsMixture(d);
        return SamplerHandle{
            mixture->order(),
            absl::StrCat("MixtureDataset.order(", mixture->order()->size(),
                         " positions an epoch, ", mixture->offsets().size() - 1,
                         " sources)")};
      },
      "dataset"_a, "The mixed order of a mixture_dataset.");
  m.def(
      "_mixture_offsets",
      [](const DatasetHandle& d) { return AsMixture(d)->offsets(); },
      "dataset"_a,
      "The first index of each source, and the total last (K + 1 values).");
  m.def(
      "_mixture_source_of",
      [](const DatasetHandle& d, int64_t index) {
        std::shared_ptr<const MixtureDataset> mixture = AsMixture(d);
        if (index < 0 || index >= mixture->size()) {
          throw StatusError(absl::OutOfRangeError(absl::StrCat(
              "index ", index, ": must be in [0, ", mixture->size(), ")")));
        }
        return mixture->SourceOf(index);
      },
      "dataset"_a, "index"_a, "The source of concatenated index `index`.");
  m.def(
      "_mixture_quotas",
      [](const DatasetHandle& d, int64_t epoch, int64_t position) {
        if (epoch < 0 || position < 0) {
          throw StatusError(absl::OutOfRangeError(
              absl::StrCat("epoch ", epoch, ", position ", position,
                           ": both must be >= 0")));
        }
        return AsMixture(d)->Quotas(epoch, position);
      },
      "dataset"_a, "epoch"_a, "position"_a,
      "Each source's integer quota per window at `position` of `epoch`.");

  m.def("open_packed_tokens", &OpenPackedTokens, "path"_a, "seq_len"_a,
        "token_bytes"_a, "signed_tokens"_a, "eos_id"_a, "offsets_path"_a,
        "pad_id"_a, "ignore_index"_a,
        "Fixed [seq_len] rows packed from whole documents of a flat token "
        "file (loader/packed_token_dataset.h).");
  m.def(
      "_packed_token_counts",
      [](const DatasetHandle& d) {
        auto packed =
            std::dynamic_pointer_cast<const PackedTokenDataset>(d.dataset);
        if (packed == nullptr) {
          throw StatusError(absl::InvalidArgumentError(
              absl::StrCat(d.description, " is not a PackedTokens dataset")));
        }
        return std::make_tuple(packed->tokens(), packed->documents());
      },
      "dataset"_a, "(tokens, documents) of an open_packed_tokens dataset.");
}

}  // namespace pinwheel::python
