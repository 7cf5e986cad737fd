#include "samples/python/ext/py_loader.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <dlpack/dlpack.h>
#include <memory>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

#include "loader/loader_builder.h"
#include "loader/telemetry/rank_wait.h"
#include "loader/telemetry/stall_verdict.h"
#include "loader/telemetry/stats_export.h"
#include "samples/python/ext/py_dlpack.h"
#include "transfer/stream.h"

namespace pinwheel::python {
namespace {

// What one exported DLPack view owns: a share of the batch (so the batch is
// released only after the view is deleted, see Note [the hand-over and the
// release rule]) and the library's own view of the field.
struct ViewContext {
  std::shared_ptr<DeviceBatch> owner;
  DLManagedTensor* inner = nullptr;
  DLManagedTensor tensor{};
};

void DeleteView(DLManagedTensor* self) {
  auto* context = static_cast<ViewContext*>(self->manager_ctx);
  if (context->inner != nullptr && context->inner->deleter != nullptr) {
    context->inner->deleter(context->inner);
  }
  delete context;
}

// A "dltensor" capsule owning the view until a consumer renames it
// ("used_dltensor") and takes over the deleter (the DLPack convention).
nb::object DLPackCapsule(const std::shared_ptr<DeviceBatch>& batch, int field) {
  DLManagedTensor* inner = ValueOrThrow(batch->ToDLPack(field));
  auto* context = new ViewContext{batch, inner, {}};
  context->tensor.dl_tensor = inner->dl_tensor;
  context->tensor.manager_ctx = context;
  context->tensor.deleter = DeleteView;
  PyObject* capsule =
      PyCapsule_New(&context->tensor, "dltensor", [](PyObject* self) noexcept {
        if (PyCapsule_IsValid(self, "dltensor")) {
          auto* t = static_cast<DLManagedTensor*>(
              PyCapsule_GetPointer(self, "dltensor"));
          if (t != nullptr && t->deleter != nullptr) t->deleter(t);
        }
      });
  if (capsule == nullptr) {
    DeleteView(&context->tensor);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

// A capsule keeping a share of the batch: the owner of numpy views.
nb::object BatchOwner(const std::shared_ptr<DeviceBatch>& batch) {
  return nb::capsule(new std::shared_ptr<DeviceBatch>(batch),
                     [](void* p) noexcept {
                       delete static_cast<std::shared_ptr<DeviceBatch>*>(p);
                     });
}

// Returns the dataset index a loader error names ("... for index 17 ..."),
// or -1.
int64_t IndexNamed(absl::string_view message) {
  static constexpr absl::string_view kMarker = "for index ";
  const size_t at = message.find(kMarker);
  if (at == absl::string_view::npos) return -1;
  absl::string_view rest = message.substr(at + kMarker.size());
  size_t end = 0;
  while (end < rest.size() &&
         (std::isdigit(static_cast<unsigned char>(rest[end])) != 0 ||
          (end == 0 && rest[end] == '-'))) {
    ++end;
  }
  int64_t index = -1;
  if (!absl::SimpleAtoi(rest.substr(0, end), &index)) return -1;
  return index;
}

}  // namespace

nb::object PyBatch::Get(const std::string& name) const {
  CheckHeld();
  nb::handle value = PyDict_GetItemString(fields_.ptr(), name.c_str());
  if (!value.is_valid()) {
    std::string names;
    for (auto [key, unused] : fields_) {
      absl::StrAppend(&names, names.empty() ? "" : ", ",
                      nb::cast<std::string>(key));
    }
    PyErr_SetString(PyExc_KeyError, absl::StrCat("batch has no field '", name,
                                                 "'; fields: ", names)
                                        .c_str());
    throw nb::python_error();
  }
  return nb::borrow(value);
}

nb::dict PyBatch::fields() const {
  CheckHeld();
  return nb::dict(PyDict_Copy(fields_.ptr()), nb::detail::steal_t());
}

bool PyBatch::contains(const std::string& name) const {
  return batch_ != nullptr &&
         PyDict_GetItemString(fields_.ptr(), name.c_str()) != nullptr;
}

size_t PyBatch::num_fields() const {
  return batch_ == nullptr ? 0 : nb::len(fields_);
}

void PyBatch::Release() {
  fields_.clear();
  batch_.reset();  // the last owner releases it: see py_loader.h
}

void PyBatch::CheckHeld() const {
  if (batch_ == nullptr) {
    throw StatusError(absl::FailedPreconditionError(
        absl::StrCat("batch ", index_, " of epoch ", epoch_,
                     " was released: take what you need (or clone() it) before "
                     "release()")));
  }
}

PyLoader::PyLoader(const DatasetHandle& dataset, PyLoaderOptions options)
    : python_(dataset.python),
      worker_init_failure_(options.worker_init_failure),
      timeout_(options.timeout),
      output_(options.output),
      stream_fn_(std::move(options.stream_fn)),
      convert_fn_(std::move(options.convert_fn)),
      device_transform_(options.options.device_transform) {
  LoaderOptions o = options.options;
  // With workers, Next() waits in slices so that Ctrl-C is seen while it
  // waits (a DeadlineExceeded Next() goes on with the same batch after).
  poll_ = o.num_workers >= 1 || o.num_workers == LoaderOptions::kAuto;
  if (poll_) {
    if (timeout_ <= absl::ZeroDuration()) {
      throw StatusError(absl::InvalidArgumentError(absl::StrCat(
          "timeout = ", absl::FormatDuration(timeout_), ": must be > 0")));
    }
    o.timeout = std::min(kPollInterval, timeout_);
  } else {
    o.timeout = timeout_;  // the builder rejects a finite one without workers
  }
  LoaderBuilder builder = dataset.iterable != nullptr
                              ? LoaderBuilder(dataset.iterable)
                              : LoaderBuilder(dataset.dataset);
  builder.options(o);
  if (options.resume.has_value()) {
    builder.resume(ValueOrThrow(LoaderCheckpoint::FromBytes(*options.resume)));
  }
  absl::StatusOr<Loader> loader;
  {
    nb::gil_scoped_release nogil;
    loader = builder.Build();
  }
  loader_.emplace(ValueOrThrow(std::move(loader)));
  if (output_ == Output::kNumpy && loader_->device().is_cuda()) {
    ShutDown();
    throw StatusError(absl::InvalidArgumentError(
        "output='numpy' needs the host device: batches on a GPU are torch "
        "tensors (output='torch') or DLPack capsules (output='dlpack')"));
  }
}

PyLoader::~PyLoader() { ShutDown(); }

void PyLoader::Close() {
  CheckNotBusy("close()");
  ShutDown();
}

void PyLoader::CheckNotBusy(const char* call) const {
  if (busy_) {
    throw StatusError(absl::FailedPreconditionError(
        absl::StrCat(call,
                     " while next() runs on another thread: a Loader has one "
                     "consumer")));
  }
}

void PyLoader::ShutDown() {
  if (!loader_.has_value()) return;
  // Workers reading a Python dataset need the GIL to finish their read.
  if (PyGILState_Check() != 0 && !PythonFinalizing()) {
    nb::gil_scoped_release nogil;
    loader_->Shutdown();
    closed_report_status_ = loader_->stats_report_status();
    loader_.reset();
  } else {
    loader_->Shutdown();
    closed_report_status_ = loader_->stats_report_status();
    loader_.reset();
  }
}

Loader& PyLoader::loader() {
  if (!loader_.has_value()) {
    throw StatusError(absl::CancelledError("the loader is closed"));
  }
  return *loader_;
}

const Loader& PyLoader::loader() const {
  if (!loader_.has_value()) {
    throw StatusError(absl::CancelledError("the loader is closed"));
  }
  return *loader_;
}

nb::object PyLoader::Next() {
  Loader& l = loader();
  CheckNotBusy("next()");
  busy_ = true;
  struct Idle {
    bool& busy;
    ~Idle() { busy = false; }
  } idle{busy_};
  const absl::Time start = absl::Now();
  while (true) {
    absl::StatusOr<std::optional<DeviceBatch>> next;
    {
      nb::gil_scoped_release nogil;
      next = l.Next();
    }
    if (next.ok()) {
      if (!next->has_value()) return nb::none();
      return Present(**std::move(next));
    }
    if (poll_ && absl::IsDeadlineExceeded(next.status())) {
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
      if (absl::Now() - start < timeout_) continue;
      throw StatusError(absl::DeadlineExceededError(
          absl::StrCat("batch of epoch ", l.epoch(), " not ready after ",
                       absl::FormatDuration(timeout_),
                       " (timeout): a worker is still "
                       "reading it")));
    }
    RaiseNextError(next.status());
  }
}

void PyLoader::RaiseNextError(const absl::Status& status) {
  if (python_ != nullptr && python_->TakeInterrupt()) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw nb::python_error();
  }
  nb::object error = MakeError(status);
  nb::object cause = nb::none();
  if (python_ != nullptr) {
    cause = python_->TakeFailure(IndexNamed(status.message()));
  }
  // A worker_init failure: the exception it raised (the first one).
  if (cause.is_none() && worker_init_failure_ != nullptr &&
      worker_init_failure_->exception.get().is_valid() &&
      absl::StrContains(status.message(), "worker_init failed for worker")) {
    cause = worker_init_failure_->exception.get();
  }
  if (!cause.is_none()) {
    PyException_SetCause(error.ptr(), cause.release().ptr());
  }
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())),
                  error.ptr());
  throw nb::python_error();
}

nb::object PyLoader::Present(DeviceBatch delivered) {
  const Device device = delivered.device();
  void* native = nullptr;
  if (device.is_cuda() && stream_fn_.is_valid() && !stream_fn_.is_none()) {
    const uintptr_t handle = nb::cast<uintptr_t>(stream_fn_(device.ordinal()));
    native = reinterpret_cast<void*>(handle);
  }
  const Stream consumer = Stream::Borrow(device, native);
  ThrowIfError(delivered.WaitOn(consumer));  // no host sync on a GPU

  auto batch = std::make_shared<DeviceBatch>(std::move(delivered));
  nb::dict fields;
  nb::object owner;
  if (output_ == Output::kNumpy) owner = BatchOwner(batch);
  for (int i = 0; i < batch->num_fields(); ++i) {
    const FieldView& f = batch->field(i);
    nb::object view;
    switch (output_) {
      case Output::kNumpy:
        view = NumpyView(f.data, f.dtype, f.shape, owner);
        break;
      case Output::kTorch:
        view = convert_fn_(DLPackCapsule(batch, i));
        break;
      case Output::kDLPack:  // __dlpack__ makes a capsule per consumer
        view = nb::cast(DLPackTensor(
            batch, i, [batch, i] { return DLPackCapsule(batch, i); }));
        break;
    }
    fields[f.name.c_str()] = view;
  }
  const absl::Span<const int64_t> indices = batch->sample_indices();
  auto py_batch = std::make_unique<PyBatch>(batch, std::move(fields));
  py_batch->set_meta(batch->epoch(), batch->index(), batch->size(),
                     std::vector<int64_t>(indices.begin(), indices.end()));
  py_batch->set_padded(batch->info().padded);
  py_batch->set_buffer_index(batch->buffer_index());
  return nb::cast(py_batch.release(), nb::rv_policy::take_ownership);
}

void PyLoader::StartEpoch(int64_t epoch) {
  Loader& l = loader();
  CheckNotBusy("start_epoch()");
  absl::Status status;
  {
    nb::gil_scoped_release nogil;
    status = l.StartEpoch(epoch);
  }
  ThrowIfError(status);
}

int64_t PyLoader::epoch() const { return loader().epoch(); }
int64_t PyLoader::batches_per_epoch() const {
  return loader().batches_per_epoch();
}
std::string PyLoader::device() const { return loader().device().ToString(); }
std::vector<PyField> PyLoader::fields() const {
  std::vector<PyField> out;
  const BatchLayout& input = loader().input_layout();
  auto add = [&](const FieldSpec& f) {
    std::vector<int64_t> shape = {input.batch_size()};
    shape.insert(shape.end(), f.shape.begin(), f.shape.end());
    out.emplace_back(f.name, DTypeName(f.dtype), std::move(shape));
  };
  // With a device stage, what the batches show: its outputs, then the
  // input fields it does not consume (transfer/device_transform.h).
  if (device_transform_ != nullptr) {
    const SampleLayout output =
        ValueOrThrow(device_transform_->OutputLayout(input));
    for (const FieldSpec& f : output.fields()) add(f);
  }
  for (const FieldSpec& f : input.fields()) {
    if (device_transform_ == nullptr || !device_transform_->Consumes(f.name)) {
      add(f);
    }
  }
  return out;
}

nb::dict PyLoader::stats() const {
  const LoaderStats s = loader().stats();
  nb::dict d;
  d["batches_delivered"] = s.batches_delivered;
  d["samples_delivered"] = s.samples_delivered;
  d["bytes_delivered"] = s.bytes_delivered;
  d["samples_skipped"] = s.samples_skipped;
  d["epochs_completed"] = s.epochs_completed;
  d["consumer_wait_s"] = absl::ToDoubleSeconds(s.consumer_wait);
  d["consumer_wait_behind_buffers_s"] =
      absl::ToDoubleSeconds(s.consumer_wait_behind_buffers);
  d["pinned_bytes"] = s.pinned_bytes;
  d["device_bytes"] = s.device_bytes;
  // Issue 22: fixed shapes and mixtures.
  d["samples_padded"] = s.samples_padded;
  d["samples_replaced"] = s.samples_replaced;
  d["last_replaced"] = s.last_replaced;
  d["samples_per_source"] = nb::cast(s.samples_per_source);
  d["gather"] = s.gather;
  d["gather_fallback"] = s.gather_fallback;
  d["gather_registered_bytes"] = s.gather_registered_bytes;
  d["gather_order_on_device"] = s.gather_order_on_device;
  // Issue 30: the CPUs this process may use (loader/cpu_budget.h).
  d["cpus"] = s.cpu_budget.cpus;
  d["cpu_limited_by"] = s.cpu_budget.limited_by;
  d["cpu_affinity"] = s.cpu_budget.affinity_list;
  d["cpu_quota"] = s.cpu_budget.quota_cpus;
  d["cpu_shared_by"] = s.cpu_budget.shared_by;
  d["cpu_worker_cpus"] = s.cpu_budget.worker_cpu_list;
  d["cpu_budget"] = s.cpu_budget.ToString();
  d["num_workers"] = s.num_workers;
  d["cpu_warning"] = s.cpu_warning;
  // Issue 33: num_workers / prefetch = "auto" (loader/auto_tune_stats.h).
  nb::dict tune;
  tune["workers_auto"] = s.auto_tune.workers_auto;
  tune["prefetch_auto"] = s.auto_tune.prefetch_auto;
  tune["workers"] = s.auto_tune.workers;
  tune["max_workers"] = s.auto_tune.max_workers;
  tune["prefetch"] = s.auto_tune.prefetch;
  tune["max_prefetch"] = s.auto_tune.max_prefetch;
  tune["changes"] = s.auto_tune.changes;
  tune["last_change_batch"] = s.auto_tune.last_change_batch;
  tune["last_reason"] = s.auto_tune.last_reason;
  tune["off_reason"] = s.auto_tune.off_reason;
  d["auto_tune"] = tune;
  d["pinned_bytes_peak"] = s.ring.bytes_pinned_peak;
  // Issue 33: per-stage latencies (loader/telemetry/stage_latencies.h), in
  // seconds, and the stall verdict.
  auto summary = [](const LatencySummary& l) {
    nb::dict out;
    out["count"] = l.count;
    out["p50_s"] = absl::ToDoubleSeconds(l.p50);
    out["p90_s"] = absl::ToDoubleSeconds(l.p90);
    out["p99_s"] = absl::ToDoubleSeconds(l.p99);
    out["max_s"] = absl::ToDoubleSeconds(l.max);
    out["mean_s"] = absl::ToDoubleSeconds(l.mean);
    out["sum_s"] = absl::ToDoubleSeconds(l.sum);
    return out;
  };
  nb::dict latency;
  s.latency.ForEach([&](absl::string_view name, const StageLatency& stage) {
    nb::dict both;
    both["total"] = summary(stage.total);
    both["recent"] = summary(stage.recent);
    latency[std::string(name).c_str()] = both;
  });
  d["latency"] = latency;
  const StallVerdict verdict = StallVerdictOf(s);
  d["verdict"] = verdict.line;
  d["verdict_stage"] = std::string(verdict.stage());
  return d;
}

std::string PyLoader::StatsJson() const {
  return StatsToJson(loader().stats());
}

std::string PyLoader::StatsPrometheus(
    const std::vector<std::pair<std::string, std::string>>& labels) const {
  return ValueOrThrow(StatsToPrometheus(loader().stats(), labels));
}

std::string PyLoader::RankWaitBytes(int rank) const {
  if (rank < 0) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("rank = ", rank, ": must be >= 0")));
  }
  const RankWait record = RankWaitOf(loader().stats(), rank);
  return std::string(reinterpret_cast<const char*>(&record), sizeof record);
}

std::optional<std::string> PyLoader::StatsReportError() const {
  const absl::Status status = loader_.has_value()
                                  ? loader_->stats_report_status()
                                  : closed_report_status_;
  if (status.ok()) return std::nullopt;
  return status.ToString();
}

nb::bytes PyLoader::Checkpoint() const {
  const Loader& l = loader();
  CheckNotBusy("state_dict()");
  absl::StatusOr<LoaderCheckpoint> checkpoint;
  {
    nb::gil_scoped_release nogil;
    checkpoint = l.Checkpoint();
  }
  const std::string bytes = ValueOrThrow(std::move(checkpoint)).ToBytes();
  return nb::bytes(bytes.data(), bytes.size());
}

}  // namespace pinwheel::python
