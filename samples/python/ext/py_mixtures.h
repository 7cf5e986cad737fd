// Mixtures, custom samplers and packed token rows as the extension module
// binds them (issue 22 item 5; py_mixtures.cc): the shipped IndexSamplers
// (WeightedRandomSampler, ClassBalancedSampler) and a sampler whose At() is
// Python code, MixtureDataset with its order, and PackedTokenDataset.
#ifndef PINWHEEL_SAMPLES_PYTHON_EXT_PY_MIXTURES_H_
#define PINWHEEL_SAMPLES_PYTHON_EXT_PY_MIXTURES_H_

#include <memory>
#include <nanobind/nanobind.h>
#include <string>

#include "loader/index_sampler.h"
#include "samples/python/ext/py_support.h"

namespace pinwheel::python {

// What the Python sampler classes hold and the Loader takes as sampler.
// Immutable; thread-safe.
struct SamplerHandle {
  std::shared_ptr<const IndexSampler> sampler;
  std::string description;
};

// Adds _Sampler, weighted_random_sampler, class_balanced_sampler,
// python_sampler, mixture_dataset (and its _mixture_* queries) and
// open_packed_tokens to `m`.
void BindMixtures(nb::module_& m);

}  // namespace pinwheel::python

#endif  // PINWHEEL_SAMPLES_PYTHON_EXT_PY_MIXTURES_H_
