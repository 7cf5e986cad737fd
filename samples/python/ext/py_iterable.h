// Python code the loader calls beyond a map-style read(): an iterable
// dataset whose shards are Python objects, and a worker_init callable.
//
// Note [Python code on worker threads]
// Every call below takes the GIL, so Python code runs one call at a time
// whatever num_workers is: workers overlap only while a call has released
// the GIL (numpy copies and ufuncs on large arrays, file reads, torch ops).
// An exception becomes an absl::Status whose code follows its type (the
// same table as PythonDataset::Read) and whose message holds the type and
// text; the loader adds the shard, worker and epoch.
#ifndef PINWHEEL_SAMPLES_PYTHON_EXT_PY_ITERABLE_H_
#define PINWHEEL_SAMPLES_PYTHON_EXT_PY_ITERABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nanobind/nanobind.h>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include "loader/iterable_dataset.h"
#include "samples/python/ext/py_datasets.h"
#include "samples/python/ext/py_support.h"

namespace pinwheel::python {

// Returns the Status for the Python exception `e` (GIL held): code by its
// type, message "`what`: Type: text".
absl::Status StatusFromPython(nb::python_error& e, absl::string_view what);

// An IterableDataset whose OpenShard() calls Python
// open_shard(shard, num_shards, epoch), which returns an object with
// next(sample) -> bool (True: it wrote a sample into the numpy views of
// `sample`; False: the shard is done) and, optionally, save_state() ->
// bytes and restore_state(bytes) (Loader checkpoints need both).
// Thread-safe: Python is touched with the GIL held.
class PythonIterableDataset final : public IterableDataset {
 public:
  PythonIterableDataset(SampleLayout layout, nb::object open_shard)
      : layout_(std::move(layout)), open_shard_(std::move(open_shard)) {}

  const SampleLayout& layout() const override { return layout_; }
  absl::StatusOr<std::unique_ptr<SampleStream>> OpenShard(
      int shard, int num_shards, int64_t epoch) const override;

 private:
  SampleLayout layout_;
  PyRef open_shard_;
};

// Returns a handle (DatasetHandle::iterable set, dataset null) for an
// iterable dataset of `fields` whose shards `open_shard` opens.
DatasetHandle MakePythonIterableDataset(const std::vector<PyField>& fields,
                                        nb::object open_shard);

// The first exception a Python worker_init raised, shared by the function
// WorkerInitFromPython returns and the PyLoader, which raises its error with
// this exception as __cause__. Guarded by the GIL.
struct WorkerInitFailure {
  PyRef exception;  // null until worker_init raises
};

// Returns LoaderOptions::worker_init calling `fn(worker)` with the GIL; an
// exception becomes a Status (see the Note) and the first one is kept in
// `*failure`. `fn` is kept alive by the returned function.
std::function<absl::Status(int)> WorkerInitFromPython(
    nb::object fn, std::shared_ptr<WorkerInitFailure> failure);

}  // namespace pinwheel::python

#endif  // PINWHEEL_SAMPLES_PYTHON_EXT_PY_ITERABLE_H_
