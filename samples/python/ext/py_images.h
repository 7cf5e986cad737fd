// The image datasets, the NormalizeImage device transform and a JPEG
// encoder, as the extension module binds them (py_images.cc).
#ifndef PINWHEEL_SAMPLES_PYTHON_EXT_PY_IMAGES_H_
#define PINWHEEL_SAMPLES_PYTHON_EXT_PY_IMAGES_H_

#include <memory>
#include <nanobind/nanobind.h>
#include <string>

#include "samples/python/ext/py_support.h"
#include "transfer/device_transform.h"

namespace pinwheel::python {

// What pinwheel.NormalizeImage holds and the Loader takes as
// device_transform. Immutable; thread-safe.
struct DeviceTransformHandle {
  std::shared_ptr<const DeviceTransform> transform;
  std::string description;
};

// Adds open_image_folder, open_tar_shards, normalize_image, _DeviceTransform
// and encode_jpeg to `m`.
void BindImages(nb::module_& m);

}  // namespace pinwheel::python

#endif  // PINWHEEL_SAMPLES_PYTHON_EXT_PY_IMAGES_H_
