// What the extension module's parts share: absl::Status carried across the
// binding as a C++ exception (turned into pinwheel.errors classes by the
// module's translator), and a Python reference that may be dropped on any
// thread.
#ifndef PINWHEEL_SAMPLES_PYTHON_EXT_PY_SUPPORT_H_
#define PINWHEEL_SAMPLES_PYTHON_EXT_PY_SUPPORT_H_

#include <exception>
#include <nanobind/nanobind.h>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pinwheel::python {

namespace nb = nanobind;

// A failed absl::Status on its way to Python. The module's exception
// translator raises it as the pinwheel.errors class of its code.
class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status)
      : status_(std::move(status)), what_(status_.ToString()) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  absl::Status status_;
  std::string what_;
};

// The Status code a Python exception raised by user code maps to (read(),
// a stream's next/save_state/restore_state, open_shard, worker_init).
inline absl::StatusCode StatusCodeOfPython(const nb::python_error& e) {
  if (e.matches(PyExc_ValueError)) return absl::StatusCode::kInvalidArgument;
  if (e.matches(PyExc_IndexError)) return absl::StatusCode::kOutOfRange;
  if (e.matches(PyExc_KeyError) || e.matches(PyExc_FileNotFoundError)) {
    return absl::StatusCode::kNotFound;
  }
  if (e.matches(PyExc_TimeoutError)) return absl::StatusCode::kDeadlineExceeded;
  if (e.matches(PyExc_MemoryError)) return absl::StatusCode::kResourceExhausted;
  if (e.matches(PyExc_NotImplementedError)) {
    return absl::StatusCode::kUnimplemented;
  }
  if (e.matches(PyExc_OSError)) return absl::StatusCode::kUnavailable;
  if (e.matches(PyExc_KeyboardInterrupt)) return absl::StatusCode::kCancelled;
  return absl::StatusCode::kUnknown;
}

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) throw StatusError(value.status());
  return *std::move(value);
}

// Returns the pinwheel.errors exception instance for `status` (the class of
// its code, `.code` and `.index` set). REQUIRES: the GIL.
nb::object MakeError(const absl::Status& status);

// Whether the interpreter is shutting down (no thread may take the GIL).
bool PythonFinalizing();

// An owned Python reference that may be destroyed on any thread, with or
// without the GIL: the destructor takes the GIL, or leaks the reference when
// the interpreter is shutting down (taking the GIL then would hang the
// thread). Thread-compatible.
class PyRef {
 public:
  PyRef() = default;
  explicit PyRef(nb::object object) : object_(std::move(object)) {}
  PyRef(PyRef&&) noexcept = default;
  // The old reference leaves with `other` (and is dropped by its destructor).
  PyRef& operator=(PyRef&& other) noexcept {
    std::swap(object_, other.object_);
    return *this;
  }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() {
    if (!object_.is_valid()) return;
    if (PythonFinalizing()) {
      object_.release();  // leaked on purpose: see the class comment
      return;
    }
    nb::gil_scoped_acquire gil;
    object_.reset();
  }
  // REQUIRES: the GIL for anything but comparing the handle.
  const nb::object& get() const { return object_; }

 private:
  nb::object object_;
};

}  // namespace pinwheel::python

#endif  // PINWHEEL_SAMPLES_PYTHON_EXT_PY_SUPPORT_H_
