// The datasets the Python package offers: the shipped ones (record file,
// token windows, arrays in memory) and a dataset whose read() is Python code
// writing into numpy views of the pinned slot.
#ifndef PINWHEEL_SAMPLES_PYTHON_EXT_PY_DATASETS_H_
#define PINWHEEL_SAMPLES_PYTHON_EXT_PY_DATASETS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <nanobind/nanobind.h>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"

#include "loader/dataset.h"
#include "loader/iterable_dataset.h"
#include "samples/python/ext/py_support.h"
#include "transfer/sample_layout.h"

namespace pinwheel::python {

// A field as Python describes it: (name, dtype name such as "u8", shape).
using PyField = std::tuple<std::string, std::string, std::vector<int64_t>>;

// Returns the layout of `fields`, or InvalidArgument naming the bad one.
absl::StatusOr<SampleLayout> LayoutFromPy(const std::vector<PyField>& fields);
std::vector<PyField> LayoutToPy(const SampleLayout& layout);

// A map-style dataset whose Read() calls Python: read(index, sample) with
// `sample` a dict of numpy arrays viewing the sample's place in the pinned
// slot (valid during the call only). Read() takes the GIL, so Python reads
// run one at a time whatever the number of workers (numpy and file reads
// that release the GIL overlap). A Python exception becomes a Status whose
// code follows its type (ValueError: InvalidArgument, IndexError:
// OutOfRange, KeyError / FileNotFoundError: NotFound, TimeoutError:
// DeadlineExceeded, MemoryError: ResourceExhausted, NotImplementedError:
// Unimplemented, OSError: Unavailable, others: Unknown); the exception
// itself is kept (the last 16) so that the loader can raise it as the
// cause. KeyboardInterrupt in read() (only possible on the main thread,
// num_workers = 0) is remembered and becomes Cancelled.
// Thread-safe: everything mutable is touched with the GIL held.
//
// Note [views that outlive read()]
// read() used to get numpy views of the pinned slot itself: a view kept past
// the call later showed other samples, and read after close() (the ring
// freed) crashed the interpreter. numpy arrays cannot be revoked, so read()
// now gets views of a scratch buffer of its own, owned by a capsule that
// every view (and every view derived from one) keeps alive; when read()
// returns, the buffer is copied into the slot (one memcpy per field). If
// nothing references the capsule then (Py_REFCNT), the buffer goes back to
// a small free list for the next read(); if the user kept a view, it keeps
// that buffer, which no later read() touches: a kept view holds the values
// of its own sample for as long as it lives, after close() too.
class PythonDataset final : public Dataset {
 public:
  PythonDataset(SampleLayout layout, int64_t size, nb::object read);

  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override;

  // Returns and forgets the exception read(index) raised, or None.
  // REQUIRES: the GIL.
  nb::object TakeFailure(int64_t index) const;
  // Returns whether a KeyboardInterrupt was raised in read() since the last
  // call, and clears it. REQUIRES: the GIL.
  bool TakeInterrupt() const;

 private:
  static constexpr size_t kFailuresKept = 16;
  // Returns a scratch buffer's owner capsule: a spare one, or a new one.
  // REQUIRES: the GIL.
  nb::object TakeScratch() const;
  SampleLayout layout_;
  // Each field's offset in a scratch buffer, and the buffer's size.
  std::vector<size_t> scratch_offsets_;
  size_t scratch_bytes_ = 0;
  // Scratch buffers no view references (Note [views that outlive read()]).
  // Guarded by the GIL.
  mutable std::vector<PyRef> spare_scratch_;
  int64_t size_;
  PyRef read_;
  // Guarded by the GIL.
  mutable std::deque<std::pair<int64_t, PyRef>> failures_;
  mutable bool interrupted_ = false;
};

// What the Python classes hold: a dataset, and the Python dataset behind it
// if it is one. Thread-compatible.
struct DatasetHandle {
  std::shared_ptr<const Dataset> dataset;
  std::shared_ptr<const PythonDataset> python;  // null unless Python code
  std::string description;
  // Set (and `dataset` null) for an iterable dataset (py_iterable.h).
  std::shared_ptr<const IterableDataset> iterable;
};

DatasetHandle OpenRecordFile(const std::string& path);
DatasetHandle OpenTokenWindows(const std::string& path, int64_t seq_len,
                               int token_bytes, bool signed_tokens,
                               int64_t windows, uint64_t seed,
                               bool window = false);
// `arrays` are C-contiguous numpy arrays, one per field, of `size` samples
// each; the dataset reads them in place and keeps them alive.
DatasetHandle MakeArrayDataset(const std::vector<PyField>& fields, int64_t size,
                               std::vector<nb::object> arrays);
DatasetHandle MakePythonDataset(const std::vector<PyField>& fields,
                                int64_t size, nb::object read);
// Writes `size` records (one C-contiguous array per field) to `path`.
void WriteRecordFile(const std::string& path,
                     const std::vector<PyField>& fields, int64_t size,
                     const std::vector<nb::object>& arrays);

// Returns a numpy view of `bytes` with `dtype` and `shape` (bf16 as u16),
// kept alive by `owner` (None: not at all: valid while the memory is).
// REQUIRES: the GIL.
nb::object NumpyView(void* data, DType dtype, const std::vector<int64_t>& shape,
                     nb::handle owner);

}  // namespace pinwheel::python

#endif  // PINWHEEL_SAMPLES_PYTHON_EXT_PY_DATASETS_H_
