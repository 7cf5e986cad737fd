// The image side of the Python package (issue 19 item 4): the C++ image
// datasets (loader/image/: ImageFolderDataset, TarShardDataset), the
// NormalizeImage device transform as a handle the Loader takes, and a small
// JPEG encoder for tests and samples (no PIL needed). The Python classes in
// pinwheel/__init__.py check every argument first; the checks here are the
// C++ validators' (ValidateImageTransformOptions, NormalizeImage::Create),
// whose errors name the option.
#include "samples/python/ext/py_images.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <string>
#include <turbojpeg.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "loader/image/image_folder_dataset.h"
#include "loader/image/image_pipeline.h"
#include "loader/image/tar_shards.h"
#include "loader/storage/shard_pattern.h"
#include "samples/python/ext/py_cache.h"
#include "samples/python/ext/py_datasets.h"
#include "samples/python/ext/py_support.h"
#include "transfer/normalize_image.h"

namespace pinwheel::python {
namespace {

using namespace nb::literals;

ImageTransformOptions TransformOptions(bool train, int size, int resize_size,
                                       double min_scale, double max_scale,
                                       double min_ratio, double max_ratio,
                                       double flip_probability) {
  ImageTransformOptions o;
  o.train = train;
  o.size = size;
  o.resize_size = resize_size;
  o.crop.min_scale = min_scale;
  o.crop.max_scale = max_scale;
  o.crop.min_ratio = min_ratio;
  o.crop.max_ratio = max_ratio;
  o.flip_probability = flip_probability;
  return o;
}

TarShardOptions TarOptions(bool train, int size, int resize_size,
                           double min_scale, double max_scale, double min_ratio,
                           double max_ratio, double flip_probability,
                           uint64_t seed, bool skip_bad_samples,
                           bool shuffle_shards) {
  TarShardOptions options;
  options.transform =
      TransformOptions(train, size, resize_size, min_scale, max_scale,
                       min_ratio, max_ratio, flip_probability);
  options.seed = seed;
  options.skip_bad_samples = skip_bad_samples;
  options.shuffle_shards = shuffle_shards;
  return options;
}

DatasetHandle OpenImageFolder(const std::string& root, bool train, int size,
                              int resize_size, double min_scale,
                              double max_scale, double min_ratio,
                              double max_ratio, double flip_probability) {
  ImageFolderOptions options;
  static_cast<ImageTransformOptions&>(options) =
      TransformOptions(train, size, resize_size, min_scale, max_scale,
                       min_ratio, max_ratio, flip_probability);
  std::shared_ptr<ImageFolderDataset> ds;
  {
    nb::gil_scoped_release nogil;  // lists the whole folder
    absl::StatusOr<std::shared_ptr<ImageFolderDataset>> opened =
        ImageFolderDataset::Open(root, options);
    if (!opened.ok()) {
      nb::gil_scoped_acquire gil;
      throw StatusError(opened.status());
    }
    ds = *std::move(opened);
  }
  DatasetHandle handle{ds, nullptr, absl::StrCat("ImageFolder(", root, ")")};
  return handle;
}

DatasetHandle OpenTarShards(std::vector<std::string> shards, bool train,
                            int size, int resize_size, double min_scale,
                            double max_scale, double min_ratio,
                            double max_ratio, double flip_probability,
                            uint64_t seed, bool skip_bad_samples,
                            bool shuffle_shards, const CacheHandle* cache) {
  TarShardOptions options = TarOptions(
      train, size, resize_size, min_scale, max_scale, min_ratio, max_ratio,
      flip_probability, seed, skip_bad_samples, shuffle_shards);
  if (cache != nullptr) options.store = cache->cache;
  const std::string description =
      absl::StrCat("TarShards(", shards.size(), " files)");
  DatasetHandle handle;
  handle.iterable = WithCachePlan(
      ValueOrThrow(TarShardDataset::Open(std::move(shards), options)), cache);
  handle.description = description;
  return handle;
}

// What open_image_folder_pipeline / open_tar_shard_pipeline return: the
// dataset as the decode path delivers it and the device transform that
// goes with it (image bf16 [3, size, size] either way), and which path.
struct ImagePipelineHandle {
  DatasetHandle dataset;
  DeviceTransformHandle transform;
  bool gpu_decode = false;
  std::string decode_report;
};

ImagePipelineOptions PipelineOptions(const std::string& decode,
                                     const std::string& device, int batch_size,
                                     int cpu_workers = 0) {
  ImagePipelineOptions p;
  p.decode = ValueOrThrow(ParseImageDecode(decode));
  p.device = ValueOrThrow(Device::Parse(device));
  p.batch_size = batch_size;
  p.cpu_workers = cpu_workers;
  return p;
}

ImagePipelineHandle OpenImageFolderWithDecode(
    const std::string& root, bool train, int size, int resize_size,
    double min_scale, double max_scale, double min_ratio, double max_ratio,
    double flip_probability, const std::string& decode,
    const std::string& device, int batch_size, int cpu_workers) {
  ImageFolderOptions options;
  static_cast<ImageTransformOptions&>(options) =
      TransformOptions(train, size, resize_size, min_scale, max_scale,
                       min_ratio, max_ratio, flip_probability);
  const ImagePipelineOptions pipeline =
      PipelineOptions(decode, device, batch_size, cpu_workers);
  absl::StatusOr<ImageFolderPipeline> opened;
  {
    nb::gil_scoped_release nogil;  // lists the folder, starts the decoder
    opened = OpenImageFolderPipeline(root, options, pipeline);
  }
  if (!opened.ok()) throw StatusError(opened.status());
  ImagePipelineHandle out;
  out.dataset = {
      opened->dataset, nullptr,
      absl::StrCat("ImageFolder(", root, ", decode='", decode, "')")};
  out.transform = {opened->transform, opened->decode_report};
  out.gpu_decode = opened->gpu_decode;
  out.decode_report = opened->decode_report;
  return out;
}

ImagePipelineHandle OpenTarShardsWithDecode(
    std::vector<std::string> shards, bool train, int size, int resize_size,
    double min_scale, double max_scale, double min_ratio, double max_ratio,
    double flip_probability, uint64_t seed, bool skip_bad_samples,
    bool shuffle_shards, const std::string& decode, const std::string& device,
    int batch_size, const CacheHandle* cache) {
  TarShardOptions options = TarOptions(
      train, size, resize_size, min_scale, max_scale, min_ratio, max_ratio,
      flip_probability, seed, skip_bad_samples, shuffle_shards);
  if (cache != nullptr) options.store = cache->cache;
  const ImagePipelineOptions pipeline =
      PipelineOptions(decode, device, batch_size);
  const std::string description = absl::StrCat(
      "TarShards(", shards.size(), " files, decode='", decode, "')");
  absl::StatusOr<TarShardPipeline> opened;
  {
    nb::gil_scoped_release nogil;  // starts the decoder
    opened = OpenTarShardPipeline(std::move(shards), options, pipeline);
  }
  if (!opened.ok()) throw StatusError(opened.status());
  ImagePipelineHandle out;
  out.dataset.iterable = WithCachePlan(opened->dataset, cache);
  out.dataset.description = description;
  out.transform = {opened->transform, opened->decode_report};
  out.gpu_decode = opened->gpu_decode;
  out.decode_report = opened->decode_report;
  return out;
}

DeviceTransformHandle MakeNormalizeImage(std::vector<float> mean,
                                         std::vector<float> std,
                                         const std::string& dtype,
                                         const std::string& field,
                                         const std::string& input_layout,
                                         const std::string& output_field) {
  NormalizeImageOptions o;
  o.field = field;
  if (input_layout == "HWC") {
    o.input_layout = ImageLayout::kHWC;
  } else if (input_layout == "CHW") {
    o.input_layout = ImageLayout::kCHW;
  } else {
    throw StatusError(absl::InvalidArgumentError(absl::StrCat(
        "input_layout = '", input_layout, "': must be 'HWC' or 'CHW'")));
  }
  if (dtype == "f32") {
    o.output_dtype = DType::kFloat32;
  } else if (dtype == "f16") {
    o.output_dtype = DType::kFloat16;
  } else if (dtype == "bf16") {
    o.output_dtype = DType::kBFloat16;
  } else {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("dtype = '", dtype, "': must be 'f32', 'f16' or 'bf16'")));
  }
  o.mean = std::move(mean);
  o.std = std::move(std);
  o.output_field = output_field;
  const std::string description =
      absl::StrCat("NormalizeImage(field='", o.field, "', ", input_layout,
                   " -> ", dtype, " CHW, mean=[", absl::StrJoin(o.mean, ", "),
                   "], std=[", absl::StrJoin(o.std, ", "), "])");
  return {ValueOrThrow(NormalizeImage::Create(std::move(o))), description};
}

// Returns `pixels` (u8 [H, W, 3] or [H, W], C-contiguous) as a JPEG of
// `quality` (1..100), 4:2:0 for colour.
nb::bytes EncodeJpeg(
    nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu> pixels,
    int quality) {
  if (pixels.ndim() != 2 && !(pixels.ndim() == 3 && pixels.shape(2) == 3)) {
    throw StatusError(absl::InvalidArgumentError(absl::StrCat(
        "pixels: expected a uint8 array of shape (H, W, 3) or (H, W), got ",
        pixels.ndim(), " dimensions")));
  }
  const size_t height = pixels.shape(0);
  const size_t width = pixels.shape(1);
  if (height < 1 || width < 1 || height > 65500 || width > 65500) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("pixels: ", height, " x ", width,
                     ": each side must be in 1..65500 (JPEG's limit)")));
  }
  if (quality < 1 || quality > 100) {
    throw StatusError(absl::InvalidArgumentError(
        absl::StrCat("quality = ", quality, ": must be in 1..100")));
  }
  const bool gray = pixels.ndim() == 2;
  tjhandle handle = tjInitCompress();
  if (handle == nullptr) {
    throw StatusError(absl::InternalError("tjInitCompress failed"));
  }
  unsigned char* jpeg = nullptr;
  unsigned long jpeg_size = 0;  // NOLINT(runtime/int): TurboJPEG's type
  const int rc =
      tjCompress2(handle, pixels.data(), static_cast<int>(width),
                  static_cast<int>(width * (gray ? 1 : 3)),
                  static_cast<int>(height), gray ? TJPF_GRAY : TJPF_RGB, &jpeg,
                  &jpeg_size, gray ? TJSAMP_GRAY : TJSAMP_420, quality, 0);
  std::string error;
  if (rc != 0) error = tjGetErrorStr2(handle);
  tjDestroy(handle);
  if (rc != 0) {
    tjFree(jpeg);
    throw StatusError(
        absl::InternalError(absl::StrCat("JPEG encode failed: ", error)));
  }
  nb::bytes out(reinterpret_cast<const char*>(jpeg), jpeg_size);
  tjFree(jpeg);
  return out;
}

}  // namespace

void BindImages(nb::module_& m) {
  m.def("open_image_folder", &OpenImageFolder, "root"_a, "train"_a, "size"_a,
        "resize_size"_a, "min_scale"_a, "max_scale"_a, "min_ratio"_a,
        "max_ratio"_a, "flip_probability"_a,
        "Opens root/<class>/*.jpg (ImageFolderDataset): 'image' u8 "
        "[size, size, 3] and 'label' i64.");
  m.def(
      "expand_shard_pattern",
      [](const std::string& pattern) {
        return ValueOrThrow(ExpandShardPattern(pattern));
      },
      "pattern"_a,
      "Expands a shard list pattern (ExpandShardPattern): "
      "'s3://b/shard-{000..099}.tar' -> the 100 URLs, zero padding kept.");
  m.def("open_tar_shards", &OpenTarShards, "shards"_a, "train"_a, "size"_a,
        "resize_size"_a, "min_scale"_a, "max_scale"_a, "min_ratio"_a,
        "max_ratio"_a, "flip_probability"_a, "seed"_a, "skip_bad_samples"_a,
        "shuffle_shards"_a, "cache"_a.none(),
        "Opens WebDataset tar shards (TarShardDataset) as an iterable "
        "dataset: 'image' u8 [size, size, 3] and 'label' i64.");
  nb::class_<ImagePipelineHandle>(
      m, "_ImagePipeline",
      "An image dataset opened for a decode path, with its device transform.")
      .def_ro("dataset", &ImagePipelineHandle::dataset)
      .def_ro("transform", &ImagePipelineHandle::transform)
      .def_ro("gpu_decode", &ImagePipelineHandle::gpu_decode)
      .def_ro("decode_report", &ImagePipelineHandle::decode_report);
  m.def("open_image_folder_pipeline", &OpenImageFolderWithDecode, "root"_a,
        "train"_a, "size"_a, "resize_size"_a, "min_scale"_a, "max_scale"_a,
        "min_ratio"_a, "max_ratio"_a, "flip_probability"_a, "decode"_a,
        "device"_a, "batch_size"_a, "cpu_workers"_a = 0,
        "Opens root/<class>/*.jpg for decode = 'cpu' | 'gpu' | 'auto' "
        "(OpenImageFolderPipeline): the dataset and the device transform "
        "that together deliver 'image' bf16 [3, size, size] and 'label'; "
        "auto weighs the CPU path with cpu_workers workers (0: the CPUs "
        "this process may use, less one).");
  m.def("open_tar_shard_pipeline", &OpenTarShardsWithDecode, "shards"_a,
        "train"_a, "size"_a, "resize_size"_a, "min_scale"_a, "max_scale"_a,
        "min_ratio"_a, "max_ratio"_a, "flip_probability"_a, "seed"_a,
        "skip_bad_samples"_a, "shuffle_shards"_a, "decode"_a, "device"_a,
        "batch_size"_a, "cache"_a.none(),
        "Opens tar shards for decode = 'cpu' | 'gpu' | 'auto' "
        "(OpenTarShardPipeline), as open_image_folder_pipeline.");
  m.def(
      "image_folder_classes",
      [](const DatasetHandle& d) {
        auto folder =
            std::dynamic_pointer_cast<const ImageFolderDataset>(d.dataset);
        if (folder == nullptr) {
          throw StatusError(absl::InvalidArgumentError(
              absl::StrCat(d.description, " is not an ImageFolder")));
        }
        nb::list names;  // as os.fsdecode: a non-UTF-8 name round-trips
        for (const std::string& name : folder->classes()) {
          names.append(FileNameToPython(name));
        }
        return names;
      },
      "dataset"_a, "An ImageFolder's class names, sorted (label = index).");
  nb::class_<DeviceTransformHandle>(
      m, "_DeviceTransform",
      "A device-stage transform (see pinwheel.NormalizeImage).")
      .def("__repr__",
           [](const DeviceTransformHandle& t) { return t.description; });
  m.def("normalize_image", &MakeNormalizeImage, "mean"_a, "std"_a, "dtype"_a,
        "field"_a, "input_layout"_a, "output_field"_a,
        "The NormalizeImage device transform: u8 HWC/CHW -> CHW f32, f16 or "
        "bf16, (x - mean) / std per channel.");
  m.def("encode_jpeg", &EncodeJpeg, "pixels"_a, "quality"_a = 90,
        "JPEG bytes of a uint8 (H, W, 3) RGB or (H, W) gray array.");
}

}  // namespace pinwheel::python
