#include "samples/python/ext/py_iterable.h"

#include <cstdint>
#include <exception>
#include <memory>
#include <nanobind/stl/string.h>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "samples/python/ext/py_thread_state.h"

namespace pinwheel::python {
namespace {

absl::Status Finalizing() {
  return absl::CancelledError("the Python interpreter is shutting down");
}

// One shard's Python stream object. Not thread-safe (the loader calls it
// from one thread at a time); every call takes the GIL.
class PythonSampleStream final : public SampleStream {
 public:
  PythonSampleStream(const SampleLayout& layout, nb::object stream)
      : layout_(layout), stream_(std::move(stream)) {}

  absl::StatusOr<bool> Next(SampleView& out) override {
    if (PythonFinalizing()) return Finalizing();
    KeepPythonThreadState();
    nb::gil_scoped_acquire gil;
    try {
      nb::dict sample;
      for (int f = 0; f < layout_.num_fields(); ++f) {
        const FieldSpec& spec = layout_.fields()[f];
        sample[spec.name.c_str()] =
            NumpyView(out.field(f).data(), spec.dtype, spec.shape, nb::none());
      }
      nb::object more = stream_.get().attr("next")(sample);
      if (!nb::isinstance<nb::bool_>(more)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "next(sample) returned ", nb::cast<std::string>(nb::repr(more)),
            ": must return True (a sample was written) or False (the shard "
            "is done)"));
      }
      return nb::cast<bool>(more);
    } catch (nb::python_error& e) {
      return StatusFromPython(e, "next(sample)");
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("next(sample): ", e.what()));
    }
  }

  absl::StatusOr<std::string> SaveState() const override {
    if (PythonFinalizing()) return Finalizing();
    KeepPythonThreadState();
    nb::gil_scoped_acquire gil;
    try {
      if (!nb::hasattr(stream_.get(), "save_state")) {
        return absl::UnimplementedError(
            "the shard's stream has no save_state(): define save_state() "
            "and restore_state(state) to checkpoint an iterable dataset");
      }
      nb::object state = stream_.get().attr("save_state")();
      if (!nb::isinstance<nb::bytes>(state)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "save_state() returned ", nb::cast<std::string>(nb::repr(state)),
            ": must return bytes"));
      }
      nb::bytes bytes = nb::borrow<nb::bytes>(state);
      return std::string(bytes.c_str(), bytes.size());
    } catch (nb::python_error& e) {
      return StatusFromPython(e, "save_state()");
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("save_state(): ", e.what()));
    }
  }

  absl::Status RestoreState(absl::string_view state) override {
    if (PythonFinalizing()) return Finalizing();
    KeepPythonThreadState();
    nb::gil_scoped_acquire gil;
    try {
      if (!nb::hasattr(stream_.get(), "restore_state")) {
        return absl::UnimplementedError(
            "the shard's stream has no restore_state(state)");
      }
      stream_.get().attr("restore_state")(
          nb::bytes(state.data(), state.size()));
      return absl::OkStatus();
    } catch (nb::python_error& e) {
      return StatusFromPython(e, "restore_state(state)");
    } catch (const std::exception& e) {
      return absl::InternalError(
          absl::StrCat("restore_state(state): ", e.what()));
    }
  }

 private:
  const SampleLayout& layout_;  // the dataset's, which outlives its streams
  PyRef stream_;
};

}  // namespace

absl::Status StatusFromPython(nb::python_error& e, absl::string_view what) {
  const std::string type =
      nb::cast<std::string>(nb::handle(e.type()).attr("__name__"));
  const std::string text = TextFromPython(e.value());
  return absl::Status(StatusCodeOfPython(e),
                      absl::StrCat(what, ": ", type, ": ", text));
}

absl::StatusOr<std::unique_ptr<SampleStream>> PythonIterableDataset::OpenShard(
    int shard, int num_shards, int64_t epoch) const {
  if (PythonFinalizing()) return Finalizing();
  KeepPythonThreadState();
  nb::gil_scoped_acquire gil;
  try {
    nb::object stream = open_shard_.get()(shard, num_shards, epoch);
    if (stream.is_none() || !nb::hasattr(stream, "next")) {
      return absl::InvalidArgumentError(
          absl::StrCat("open_shard(", shard, ", ", num_shards, ", ", epoch,
                       ") returned ", nb::cast<std::string>(nb::repr(stream)),
                       ": must return an object with next(sample)"));
    }
    return std::make_unique<PythonSampleStream>(layout_, std::move(stream));
  } catch (nb::python_error& e) {
    return StatusFromPython(e, absl::StrCat("open_shard(", shard, ", ",
                                            num_shards, ", ", epoch, ")"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("open_shard(): ", e.what()));
  }
}

DatasetHandle MakePythonIterableDataset(const std::vector<PyField>& fields,
                                        nb::object open_shard) {
  if (!PyCallable_Check(open_shard.ptr())) {
    throw StatusError(
        absl::InvalidArgumentError("open_shard must be callable"));
  }
  auto ds = std::make_shared<PythonIterableDataset>(
      ValueOrThrow(LayoutFromPy(fields)), std::move(open_shard));
  DatasetHandle handle;
  handle.iterable = std::move(ds);
  handle.description = "IterableDataset";
  return handle;
}

std::function<absl::Status(int)> WorkerInitFromPython(
    nb::object fn, std::shared_ptr<WorkerInitFailure> failure) {
  if (!PyCallable_Check(fn.ptr())) {
    throw StatusError(
        absl::InvalidArgumentError("worker_init must be callable (or None)"));
  }
  auto held = std::make_shared<PyRef>(std::move(fn));
  return [held, failure = std::move(failure)](int worker) -> absl::Status {
    if (PythonFinalizing()) return Finalizing();
    KeepPythonThreadState();
    nb::gil_scoped_acquire gil;
    try {
      held->get()(worker);
      return absl::OkStatus();
    } catch (nb::python_error& e) {
      if (failure != nullptr && !failure->exception.get().is_valid()) {
        failure->exception = PyRef(nb::borrow(e.value()));
      }
      return StatusFromPython(e, absl::StrCat("worker_init(", worker, ")"));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("worker_init(): ", e.what()));
    }
  };
}

}  // namespace pinwheel::python
