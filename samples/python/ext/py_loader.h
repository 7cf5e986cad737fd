// The Loader and the batches it yields, as the extension module binds them.
//
// Note [the hand-over and the release rule]
// Next() makes the consumer stream wait for the batch's copy: on a GPU the
// stream `stream_fn(device)` names (torch's current stream), with
// cudaStreamWaitEvent, no host sync; on the host backend the calling thread
// waits. Every view of the batch (torch tensor, numpy array, DLPack
// capsule) shares one owner, the Batch's DeviceBatch. When the Batch has
// been released (release(), or garbage-collected) and the last view is gone,
// the DeviceBatch is released on that same stream: its device buffer is
// reused only after the work queued on that stream before that moment. So a
// tensor stays valid as long as it lives, like memory from torch's caching
// allocator, provided the work reading it is queued on the stream that was
// current at next() (on another stream: wait on it yourself, the same rule
// as torch's Tensor.record_stream). Views hold device buffers: keeping views
// of `device_buffers` batches stops the loader, and the next Next() raises
// FailedPreconditionError instead of hanging. After release(), indexing the
// Batch raises FailedPreconditionError.
#ifndef PINWHEEL_SAMPLES_PYTHON_EXT_PY_LOADER_H_
#define PINWHEEL_SAMPLES_PYTHON_EXT_PY_LOADER_H_

#include <cstdint>
#include <memory>
#include <nanobind/nanobind.h>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

#include "loader/loader.h"
#include "loader/loader_options.h"
#include "samples/python/ext/py_datasets.h"
#include "samples/python/ext/py_iterable.h"
#include "transfer/device_batch.h"

namespace pinwheel::python {

// How Next() presents each field.
enum class Output { kTorch, kNumpy, kDLPack };

// One delivered batch. Not thread-safe (like the DeviceBatch it owns).
class PyBatch {
 public:
  PyBatch(std::shared_ptr<DeviceBatch> batch, nb::dict fields)
      : batch_(std::move(batch)), fields_(std::move(fields)) {}

  // REQUIRES (all): the GIL.
  nb::object Get(const std::string& name) const;
  nb::dict fields() const;  // a new dict {name: view}; raises when released
  bool contains(const std::string& name) const;
  size_t num_fields() const;
  void Release();
  bool released() const { return batch_ == nullptr; }
  int64_t epoch() const { return epoch_; }
  int64_t index() const { return index_; }
  int64_t size() const { return size_; }
  std::vector<int64_t> indices() const { return indices_; }
  int64_t padded() const { return padded_; }
  void set_padded(int64_t padded) { padded_ = padded; }
  // Which device buffer holds the batch (DeviceBatch::buffer_index(): with
  // static_device_buffers, the caller's buffer it landed in).
  int buffer_index() const { return buffer_index_; }
  void set_buffer_index(int index) { buffer_index_ = index; }

  void set_meta(int64_t epoch, int64_t index, int64_t size,
                std::vector<int64_t> indices) {
    epoch_ = epoch;
    index_ = index;
    size_ = size;
    indices_ = std::move(indices);
  }

 private:
  void CheckHeld() const;
  std::shared_ptr<DeviceBatch> batch_;
  nb::dict fields_;
  int64_t epoch_ = -1;
  int64_t index_ = -1;
  int64_t size_ = 0;
  std::vector<int64_t> indices_;
  int64_t padded_ = 0;  // LoaderOptions::pad_last_batch
  int buffer_index_ = -1;
};

struct PyLoaderOptions {
  LoaderOptions options;
  absl::Duration timeout = absl::InfiniteDuration();  // the user's
  Output output = Output::kDLPack;
  nb::object stream_fn;   // device ordinal -> cudaStream_t as int; or None
  nb::object convert_fn;  // DLPack capsule -> tensor (kTorch); or None
  // LoaderCheckpoint bytes to resume from (Loader.state_dict()), or none.
  std::optional<std::string> resume;
  // Where a Python worker_init keeps the exception it raised, or null.
  std::shared_ptr<WorkerInitFailure> worker_init_failure;
};

// One consumer at a time, like Loader: next(), start_epoch() and close()
// called while another thread is inside next() raise FailedPrecondition
// (next() runs without the GIL). Destroying it (or close()) releases the
// GIL and joins every thread. Thread-safe in that sense; state is guarded
// by the GIL.
class PyLoader {
 public:
  PyLoader(const DatasetHandle& dataset, PyLoaderOptions options);
  PyLoader(const PyLoader&) = delete;
  PyLoader& operator=(const PyLoader&) = delete;
  ~PyLoader();

  // Returns the next PyBatch, or None at the end of the epoch. Raises the
  // pinwheel.errors class of a failure (a Python dataset's exception as its
  // __cause__), KeyboardInterrupt on Ctrl-C while waiting.
  nb::object Next();
  void StartEpoch(int64_t epoch);
  void Close();
  bool closed() const { return !loader_.has_value(); }
  // Whether a thread is inside Next() now.
  bool busy() const { return busy_; }

  int64_t epoch() const;
  int64_t batches_per_epoch() const;
  std::string device() const;
  std::vector<PyField> fields() const;
  nb::dict stats() const;
  // StatsToJson / StatsToPrometheus (loader/telemetry/stats_export.h).
  std::string StatsJson() const;
  std::string StatsPrometheus(
      const std::vector<std::pair<std::string, std::string>>& labels) const;
  // RankWaitOf(stats(), rank) as its bytes (loader/telemetry/rank_wait.h).
  std::string RankWaitBytes(int rank) const;
  // None, or Loader::stats_report_status()'s message (the periodic reports
  // stopped on it).
  std::optional<std::string> StatsReportError() const;
  // Returns Loader::Checkpoint() as its bytes (LoaderCheckpoint::ToBytes).
  nb::bytes Checkpoint() const;

 private:
  // How long one wait inside Next() lasts before signals are checked.
  static constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

  Loader& loader();
  const Loader& loader() const;
  // Raises FailedPrecondition naming `call` while next() runs elsewhere.
  void CheckNotBusy(const char* call) const;
  // Stops and joins the loader (idempotent). Never throws.
  void ShutDown();
  [[noreturn]] void RaiseNextError(const absl::Status& status);
  nb::object Present(DeviceBatch batch);

  std::optional<Loader> loader_;
  // The loader's stats_report_status() when it was closed.
  absl::Status closed_report_status_;
  bool busy_ = false;  // a thread is inside Next() (guarded by the GIL)
  std::shared_ptr<const PythonDataset> python_;
  std::shared_ptr<WorkerInitFailure> worker_init_failure_;  // or null
  absl::Duration timeout_;
  bool poll_;  // Next() waits in kPollInterval slices (num_workers >= 1)
  Output output_;
  nb::object stream_fn_;
  nb::object convert_fn_;
  // The device stage's transform, or null: fields() shows its outputs.
  std::shared_ptr<const DeviceTransform> device_transform_;
};

}  // namespace pinwheel::python

#endif  // PINWHEEL_SAMPLES_PYTHON_EXT_PY_LOADER_H_
