// DLPackTensor: a batch's field with output="dlpack". It implements the
// DLPack protocol's Python side, __dlpack__ and __dlpack_device__, so that
// np.from_dlpack(x), torch.from_dlpack(x) and other array libraries take it
// directly (a bare "dltensor" capsule is what __dlpack__ returns, not what
// from_dlpack accepts).
//
// Example (Python):
//   loader = pinwheel.Loader(ds, batch_size=8, output="dlpack")
//   x = np.from_dlpack(next(iter(loader))["x"])
//
// Every __dlpack__ call exports a new capsule sharing the batch (the release
// rule of py_loader.h applies: the batch's buffer is reused only once every
// capsule's tensor and this object are gone). Not thread-safe: the GIL.
#ifndef PINWHEEL_SAMPLES_PYTHON_EXT_PY_DLPACK_H_
#define PINWHEEL_SAMPLES_PYTHON_EXT_PY_DLPACK_H_

#include <functional>
#include <memory>
#include <nanobind/nanobind.h>
#include <utility>

#include "samples/python/ext/py_support.h"
#include "transfer/device_batch.h"

namespace pinwheel::python {

class DLPackTensor {
 public:
  // `export_capsule` makes one "dltensor" capsule of field `field` of
  // `batch` (a share of the batch its owner).
  DLPackTensor(std::shared_ptr<DeviceBatch> batch, int field,
               std::function<nb::object()> export_capsule)
      : batch_(std::move(batch)),
        field_(field),
        export_capsule_(std::move(export_capsule)) {}

  // __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None):
  // returns a new "dltensor" capsule (a legacy, unversioned one: allowed
  // whatever max_version says). On a GPU, `stream` (the consumer's: 1 or
  // None the legacy default stream, 2 the per-thread one, else a
  // cudaStream_t as an int; -1 no synchronization) is made to wait for the
  // batch's copy without a host sync. BufferError for a dl_device other
  // than __dlpack_device__() or copy=True (pinwheel exports views only).
  nb::object Export(nb::handle stream, nb::handle max_version,
                    nb::handle dl_device, nb::handle copy);
  // __dlpack_device__(): (kDLCPU = 1, 0) on the host backend, (kDLCUDA =
  // 2, ordinal) on a GPU.
  nb::tuple DeviceTuple() const;
  int field() const { return field_; }

 private:
  std::shared_ptr<DeviceBatch> batch_;
  int field_;
  std::function<nb::object()> export_capsule_;
};

// Adds class DLPackTensor to the module.
void BindDLPack(nb::module_& m);

}  // namespace pinwheel::python

#endif  // PINWHEEL_SAMPLES_PYTHON_EXT_PY_DLPACK_H_
