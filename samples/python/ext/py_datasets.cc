#include "samples/python/ext/py_datasets.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

#include "loader/in_memory_dataset.h"
#include "loader/record_file.h"
#include "loader/token_window_dataset.h"
#include "samples/python/ext/py_thread_state.h"

namespace pinwheel::python {
namespace {

nb::dlpack::dtype NumpyDType(DType dtype) {
  using nb::dlpack::dtype_code;
  const uint8_t bits = static_cast<uint8_t>(DTypeSize(dtype) * 8);
  switch (dtype) {
    case DType::kBool:
      return {static_cast<uint8_t>(dtype_code::Bool), 8, 1};
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return {static_cast<uint8_t>(dtype_code::Int), bits, 1};
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return {static_cast<uint8_t>(dtype_code::Float), bits, 1};
    case DType::kBFloat16:  // numpy has no bfloat16: its bits as u16
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return {static_cast<uint8_t>(dtype_code::UInt), bits, 1};
  }
  return {static_cast<uint8_t>(dtype_code::UInt), 8, 1};
}

// Returns the bytes of a C-contiguous CPU array (ValueError otherwise).
absl::Span<const std::byte> ArrayBytes(const nb::object& array,
                                       const std::string& field) {
  using Array = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
  Array a;
  if (!nb::try_cast<Array>(array, a)) {
    throw StatusError(absl::InvalidArgumentError(absl::StrCat(
        "field '", field,
        "': expected a C-contiguous CPU array (numpy.ascontiguousarray)")));
  }
  return absl::MakeConstSpan(static_cast<const std::byte*>(a.data()),
                             a.nbytes());
}

// InMemoryDataset over numpy arrays it keeps alive. Thread-safe (immutable).
class ArrayDataset final : public Dataset {
 public:
  ArrayDataset(std::shared_ptr<InMemoryDataset> inner,
               std::vector<nb::object> arrays)
      : inner_(std::move(inner)) {
    for (nb::object& a : arrays) arrays_.emplace_back(std::move(a));
  }
  int64_t size() const override { return inner_->size(); }
  const SampleLayout& layout() const override { return inner_->layout(); }
  absl::Status Read(int64_t index, SampleView& out) const override {
    return inner_->Read(index, out);
  }
  // The arrays in place, for the gather path (LoaderOptions::gather): the
  // loader holds this dataset, and so the arrays, while it reads them.
  absl::StatusOr<GatherSource> Gather(uint64_t max_copy_bytes) const override {
    return inner_->Gather(max_copy_bytes);
  }

 private:
  std::shared_ptr<InMemoryDataset> inner_;
  std::vector<PyRef> arrays_;
};

}  // namespace

bool PythonFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

absl::StatusOr<SampleLayout> LayoutFromPy(const std::vector<PyField>& fields) {
  std::vector<FieldSpec> specs;
  for (const auto& [name, dtype_name, shape] : fields) {
    absl::StatusOr<DType> dtype = ParseDType(dtype_name);
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", name, "': ", dtype.status().message(),
                       " (u8, i8, u16, i16, u32, i32, u64, i64, f16, bf16, "
                       "f32, f64, bool)"));
    }
    specs.push_back({.name = name, .dtype = *dtype, .shape = shape});
  }
  return SampleLayout::Create(std::move(specs));
}

std::vector<PyField> LayoutToPy(const SampleLayout& layout) {
  std::vector<PyField> out;
  for (const FieldSpec& f : layout.fields()) {
    out.emplace_back(f.name, DTypeName(f.dtype), f.shape);
  }
  return out;
}

namespace {

// numpy's C API, reached at run time through the table its
// multiarray module exports (the _ARRAY_API capsule), as pybind11 does:
// no numpy headers at build time. The slots' numbers are numpy's ABI,
// the same in numpy 1.x and 2.x.
//
// Note [numpy views without numpy.asarray]
// nanobind's ndarray cast makes a numpy view by calling numpy.asarray() on
// a buffer-protocol object. PyArray_NewFromDescr makes the same view
// directly: a Python dataset of 16 fields with an empty read() (16 views a
// sample) took 7.0, 7.2 and 8.6 us of CPU a sample before, 3.0, 3.2 and 5.5
// after, on the loaded 2-core CI box (bench_batch_overhead.py
// --python_dataset: medians of 5, three runs each). Each batch's numpy
// views (output="numpy") are made the same way.
class NumpyApi {
 public:
  // Returns the API, or null when numpy cannot be imported (or its table
  // is missing): NumpyView then takes nanobind's way. REQUIRES: the GIL.
  static const NumpyApi* Get() {
    static const NumpyApi* const api = Load();
    return api;
  }

  // Returns a new C-contiguous, writable array over `data` whose base is
  // `owner` (none: no base), or null with a Python error set.
  PyObject* View(void* data, int type_num, const std::vector<int64_t>& shape,
                 nb::handle owner) const {
    PyObject* descr = descr_from_type_(type_num);  // a new reference
    if (descr == nullptr) return nullptr;
    std::vector<Py_intptr_t> dims(shape.begin(), shape.end());
    constexpr int kCArrayWritable =
        0x0001 | 0x0100 | 0x0400;  // NPY_ARRAY_CARRAY
    PyObject* array = new_from_descr_(
        array_type_, descr, static_cast<int>(dims.size()), dims.data(), nullptr,
        data, kCArrayWritable, nullptr);  // steals descr
    if (array == nullptr || !owner.is_valid() || owner.is_none()) return array;
    if (set_base_object_(array, owner.inc_ref().ptr()) != 0) {  // steals owner
      Py_DECREF(array);
      return nullptr;
    }
    return array;
  }

 private:
  static const NumpyApi* Load() {
    try {
      nb::module_ numpy = nb::module_::import_("numpy");
      const std::string version =
          nb::cast<std::string>(numpy.attr("__version__"));
      nb::module_ multiarray = nb::module_::import_(
          version.rfind("1.", 0) == 0 ? "numpy.core.multiarray"
                                      : "numpy._core.multiarray");
      nb::object capsule = multiarray.attr("_ARRAY_API");
      void** table =
          static_cast<void**>(PyCapsule_GetPointer(capsule.ptr(), nullptr));
      if (table == nullptr) {
        PyErr_Clear();
        return nullptr;
      }
      auto* api = new NumpyApi();  // leaked: used until exit
      api->array_type_ = static_cast<PyTypeObject*>(table[2]);
      api->descr_from_type_ = reinterpret_cast<PyObject* (*)(int)>(table[45]);
      api->new_from_descr_ =
          reinterpret_cast<PyObject* (*)(PyTypeObject*, PyObject*, int,
                                         Py_intptr_t*, Py_intptr_t*, void*, int,
                                         PyObject*)>(table[94]);
      api->set_base_object_ =
          reinterpret_cast<int (*)(PyObject*, PyObject*)>(table[282]);
      return api;
    } catch (const nb::python_error&) {
      return nullptr;  // the error is cleared with the exception
    }
  }

  PyTypeObject* array_type_ = nullptr;
  PyObject* (*descr_from_type_)(int) = nullptr;
  PyObject* (*new_from_descr_)(PyTypeObject*, PyObject*, int, Py_intptr_t*,
                               Py_intptr_t*, void*, int, PyObject*) = nullptr;
  int (*set_base_object_)(PyObject*, PyObject*) = nullptr;
};

// numpy's type number of `dtype` (bf16: its bits as u16), LP64 Linux.
int NumpyTypeNum(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return 0;  // NPY_BOOL
    case DType::kInt8:
      return 1;  // NPY_BYTE
    case DType::kUInt8:
      return 2;  // NPY_UBYTE
    case DType::kInt16:
      return 3;  // NPY_SHORT
    case DType::kUInt16:
    case DType::kBFloat16:
      return 4;  // NPY_USHORT
    case DType::kInt32:
      return 5;  // NPY_INT
    case DType::kUInt32:
      return 6;  // NPY_UINT
    case DType::kInt64:
      return 7;  // NPY_LONG
    case DType::kUInt64:
      return 8;  // NPY_ULONG
    case DType::kFloat32:
      return 11;  // NPY_FLOAT
    case DType::kFloat64:
      return 12;  // NPY_DOUBLE
    case DType::kFloat16:
      return 23;  // NPY_HALF
  }
  return 2;
}

}  // namespace

nb::object NumpyView(void* data, DType dtype, const std::vector<int64_t>& shape,
                     nb::handle owner) {
  // See Note [numpy views without numpy.asarray].
  static_assert(sizeof(long) == 8, "NPY_LONG is int64 on LP64 only");
  if (const NumpyApi* api = NumpyApi::Get(); api != nullptr) {
    PyObject* array = api->View(data, NumpyTypeNum(dtype), shape, owner);
    if (array == nullptr) throw nb::python_error();
    return nb::steal(array);
  }
  std::vector<size_t> dims(shape.begin(), shape.end());
  nb::ndarray<nb::numpy> array(data, dims.size(), dims.data(), owner,
                               /*strides=*/nullptr, NumpyDType(dtype));
  return array.cast(nb::rv_policy::reference);
}

PythonDataset::PythonDataset(SampleLayout layout, int64_t size, nb::object read)
    : layout_(std::move(layout)), size_(size), read_(std::move(read)) {
  for (const FieldSpec& spec : layout_.fields()) {
    scratch_offsets_.push_back(scratch_bytes_);
    scratch_bytes_ += (spec.bytes() + 63) / 64 * 64;  // fields 64-aligned
  }
}

nb::object PythonDataset::TakeScratch() const {
  if (!spare_scratch_.empty()) {
    nb::object owner = spare_scratch_.back().get();
    spare_scratch_.pop_back();
    // Zeroed as a new one is: a field read() leaves unwritten is zeros,
    // never the values of the sample this buffer held before (issue 35).
    std::memset(nb::borrow<nb::capsule>(owner).data(), 0,
                std::max<size_t>(scratch_bytes_, 1));
    return owner;
  }
  auto* bytes = new std::byte[std::max<size_t>(scratch_bytes_, 1)]();
  return nb::capsule(
      bytes, [](void* p) noexcept { delete[] static_cast<std::byte*>(p); });
}

absl::Status PythonDataset::Read(int64_t index, SampleView& out) const {
  if (PythonFinalizing()) {
    return absl::CancelledError("the Python interpreter is shutting down");
  }
  KeepPythonThreadState();  // see py_thread_state.h
  nb::gil_scoped_acquire gil;
  try {
    // Note [views that outlive read()]: views of a scratch buffer, copied
    // into the slot after the call.
    nb::object owner = TakeScratch();
    auto* scratch =
        static_cast<std::byte*>(nb::borrow<nb::capsule>(owner).data());
    {
      nb::dict sample;
      for (int f = 0; f < layout_.num_fields(); ++f) {
        const FieldSpec& spec = layout_.fields()[f];
        sample[spec.name.c_str()] = NumpyView(scratch + scratch_offsets_[f],
                                              spec.dtype, spec.shape, owner);
      }
      read_.get()(index, sample);
    }  // our views go here; what still holds `owner` now is the user's
    for (int f = 0; f < layout_.num_fields(); ++f) {
      const absl::Span<std::byte> field = out.field(f);
      std::memcpy(field.data(), scratch + scratch_offsets_[f], field.size());
    }
    if (Py_REFCNT(owner.ptr()) == 1) {
      spare_scratch_.emplace_back(std::move(owner));
    }
    return absl::OkStatus();
  } catch (nb::python_error& e) {
    if (e.matches(PyExc_KeyboardInterrupt)) {
      interrupted_ = true;
      return absl::CancelledError("KeyboardInterrupt in read()");
    }
    const std::string type =
        nb::cast<std::string>(nb::handle(e.type()).attr("__name__"));
    const std::string text = TextFromPython(e.value());
    nb::object value = nb::borrow(e.value());
    if (failures_.size() == kFailuresKept) failures_.pop_front();
    failures_.emplace_back(index, PyRef(std::move(value)));
    return absl::Status(StatusCodeOfPython(e), absl::StrCat(type, ": ", text));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("read(): ", e.what()));
  }
}

nb::object PythonDataset::TakeFailure(int64_t index) const {
  for (auto it = failures_.begin(); it != failures_.end(); ++it) {
    if (it->first == index) {
      nb::object value = it->second.get();
      failures_.erase(it);
      return value;
    }
  }
  return nb::none();
}

bool PythonDataset::TakeInterrupt() const {
  return std::exchange(interrupted_, false);
}

DatasetHandle OpenRecordFile(const std::string& path) {
  std::shared_ptr<RecordFileDataset> ds =
      ValueOrThrow(RecordFileDataset::Open(path));
  return {ds, nullptr, absl::StrCat("RecordFile(", path, ")")};
}

DatasetHandle OpenTokenWindows(const std::string& path, int64_t seq_len,
                               int token_bytes, bool signed_tokens,
                               int64_t windows, uint64_t seed, bool window) {
  std::shared_ptr<TokenWindowDataset> ds =
      ValueOrThrow(TokenWindowDataset::Open(
          path, {.token_bytes = token_bytes,
                 .signed_tokens = signed_tokens,
                 .seq_len = seq_len,
                 .windows = windows,
                 .seed = seed,
                 .output = window ? TokenOutput::kWindow
                                  : TokenOutput::kInputAndTargetInt64}));
  return {ds, nullptr, absl::StrCat("TokenWindows(", path, ")")};
}

DatasetHandle MakeArrayDataset(const std::vector<PyField>& fields, int64_t size,
                               std::vector<nb::object> arrays) {
  SampleLayout layout = ValueOrThrow(LayoutFromPy(fields));
  if (arrays.size() != fields.size()) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat(fields.size(), " fields but ", arrays.size(), " arrays")));
  }
  std::vector<absl::Span<const std::byte>> spans;
  for (size_t f = 0; f < arrays.size(); ++f) {
    spans.push_back(ArrayBytes(arrays[f], std::get<0>(fields[f])));
  }
  std::shared_ptr<InMemoryDataset> inner = ValueOrThrow(
      InMemoryDataset::Create(std::move(layout), size, std::move(spans)));
  return {std::make_shared<ArrayDataset>(std::move(inner), std::move(arrays)),
          nullptr, "ArrayDataset"};
}

DatasetHandle MakePythonDataset(const std::vector<PyField>& fields,
                                int64_t size, nb::object read) {
  if (size < 0) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("dataset size ", size, ": must be >= 0")));
  }
  if (!PyCallable_Check(read.ptr())) {
    throw StatusError(absl::InvalidArgumentError("read must be callable"));
  }
  auto ds = std::make_shared<PythonDataset>(ValueOrThrow(LayoutFromPy(fields)),
                                            size, std::move(read));
  return {ds, ds, "PythonDataset"};
}

void WriteRecordFile(const std::string& path,
                     const std::vector<PyField>& fields, int64_t size,
                     const std::vector<nb::object>& arrays) {
  SampleLayout layout = ValueOrThrow(LayoutFromPy(fields));
  if (arrays.size() != fields.size()) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat(fields.size(), " fields but ", arrays.size(), " arrays")));
  }
  std::vector<absl::Span<const std::byte>> columns;
  for (size_t f = 0; f < arrays.size(); ++f) {
    const absl::Span<const std::byte> bytes =
        ArrayBytes(arrays[f], std::get<0>(fields[f]));
    const size_t want = layout.fields()[f].bytes() * static_cast<size_t>(size);
    if (bytes.size() != want) {
      throw StatusError(absl::InvalidArgumentError(
          absl::StrCat("field '", std::get<0>(fields[f]), "': ", bytes.size(),
                       " bytes, expected ", want, " (", size, " records)")));
    }
    columns.push_back(bytes);
  }
  RecordFileWriter writer =
      ValueOrThrow(RecordFileWriter::Create(path, layout));
  nb::gil_scoped_release nogil;  // the arrays stay alive: the caller holds them
  std::vector<absl::Span<const std::byte>> record(columns.size());
  for (int64_t i = 0; i < size; ++i) {
    for (size_t f = 0; f < columns.size(); ++f) {
      const size_t n = layout.fields()[f].bytes();
      record[f] = columns[f].subspan(static_cast<size_t>(i) * n, n);
    }
    ThrowIfError(writer.Append(record));
  }
  ThrowIfError(writer.Close());
}

}  // namespace pinwheel::python
