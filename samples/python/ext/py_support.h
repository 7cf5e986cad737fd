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
#include "absl/strings/string_view.h"

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

// Returns `text` (UTF-8, from a Status or a path) as a str; bytes that are
// not UTF-8 (a Latin-1 file name) come out as \xNN escapes, never as a
// UnicodeDecodeError. REQUIRES: the GIL.
inline nb::str TextToPython(absl::string_view text) {
  PyObject* s = PyUnicode_DecodeUTF8(
      text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
  if (s == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(s);
}

// Returns a file name's bytes as os.fsdecode() does (undecodable bytes as
// surrogates): os.fsencode() gives the same bytes back. REQUIRES: the GIL.
inline nb::str FileNameToPython(absl::string_view name) {
  PyObject* s = PyUnicode_DecodeFSDefaultAndSize(
      name.data(), static_cast<Py_ssize_t>(name.size()));
  if (s == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(s);
}

// Returns str(object) as UTF-8 for a Status message; what UTF-8 cannot hold
// (a lone surrogate from os.fsdecode of a non-UTF-8 name) as \x, \u
// escapes, never a UnicodeEncodeError. REQUIRES: the GIL.
inline std::string TextFromPython(nb::handle object) {
  nb::str text = nb::str(object);
  PyObject* bytes =
      PyUnicode_AsEncodedString(text.ptr(), "utf-8", "backslashreplace");
  if (bytes == nullptr) throw nb::python_error();
  nb::object owned = nb::steal(bytes);
  return std::string(PyBytes_AS_STRING(bytes),
                     static_cast<size_t>(PyBytes_GET_SIZE(bytes)));
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
