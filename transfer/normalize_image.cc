#include "transfer/normalize_image.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "transfer/device_stage/transform_kernels.h"
#include "transfer/device_stage/transform_work.h"
#include "transfer/internal/float16.h"

#ifdef PINWHEEL_HAVE_CUDA
#include "pinning/base/cuda_status.h"
#endif

namespace pinwheel {
namespace {

using internal::NormalizeConstants;
using internal::NormalizeOutput;

// The host backend's loop: the kernel's arithmetic, element by element.
template <typename Store>
void NormalizeOnHost(const uint8_t* input, bool hwc, int64_t samples,
                     int channels, int64_t plane, const NormalizeConstants& k,
                     Store store) {
  const int64_t image = channels * plane;
  for (int64_t s = 0; s < samples; ++s) {
    const uint8_t* in = input + s * image;
    for (int c = 0; c < channels; ++c) {
      const int64_t out_base = s * image + c * plane;
      for (int64_t p = 0; p < plane; ++p) {
        const uint8_t x = hwc ? in[p * channels + c] : in[c * plane + p];
        const float centred = static_cast<float>(x) - k.mean[c];
        const float v = centred * k.scale[c];
        store(out_base + p, v);
      }
    }
  }
}

std::string Expected(const NormalizeImageOptions& o) {
  return absl::StrCat(
      "expected u8", o.input_layout == ImageLayout::kHWC ? "[H,W," : "[",
      o.mean.size(), o.input_layout == ImageLayout::kHWC ? "]" : ",H,W]",
      o.input_layout == ImageLayout::kHWC ? " (HWC)" : " (CHW)");
}

}  // namespace

absl::StatusOr<std::shared_ptr<NormalizeImage>> NormalizeImage::Create(
    NormalizeImageOptions options) {
  auto bad = [](absl::string_view option, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("normalize_image: option '", option, "': ", why));
  };
  if (options.field.empty()) return bad("field", "must name a field");
  if (options.output_dtype != DType::kFloat32 &&
      options.output_dtype != DType::kFloat16 &&
      options.output_dtype != DType::kBFloat16) {
    return bad("output_dtype", absl::StrCat(DTypeName(options.output_dtype),
                                            " is not one of f32, f16, bf16"));
  }
  const size_t channels = options.mean.size();
  if (channels < 1 ||
      channels > static_cast<size_t>(internal::kMaxNormalizeChannels)) {
    return bad("mean", absl::StrCat(channels, " values: one per channel, 1..",
                                    internal::kMaxNormalizeChannels));
  }
  if (options.std.size() != channels) {
    return bad("std", absl::StrCat(options.std.size(), " values for ", channels,
                                   " mean values: one per channel"));
  }
  for (size_t c = 0; c < channels; ++c) {
    if (!std::isfinite(options.mean[c])) {
      return bad("mean", absl::StrCat("mean[", c, "] = ", options.mean[c],
                                      ": must be finite"));
    }
    if (!std::isfinite(options.std[c]) || !(options.std[c] > 0)) {
      return bad("std", absl::StrCat("std[", c, "] = ", options.std[c],
                                     ": must be finite and > 0"));
    }
  }
  if (options.output_field.empty()) options.output_field = options.field;
  return std::shared_ptr<NormalizeImage>(
      new NormalizeImage(std::move(options)));
}

NormalizeImage::NormalizeImage(NormalizeImageOptions options)
    : options_(std::move(options)) {
  for (float s : options_.std) scale_.push_back(1.0f / s);
}

absl::StatusOr<SampleLayout> NormalizeImage::OutputLayout(
    const BatchLayout& input) const {
  const SampleLayout& sample = input.sample();
  const int f = sample.FieldIndex(options_.field);
  if (f < 0) {
    std::vector<std::string> names;
    for (const FieldSpec& spec : sample.fields()) {
      names.push_back(spec.ToString());
    }
    return absl::InvalidArgumentError(
        absl::StrCat("input field '", options_.field, "' is not in the batch (",
                     absl::StrJoin(names, ", "), "); ", Expected(options_)));
  }
  const FieldSpec& spec = sample.fields()[f];
  const int64_t channels = static_cast<int64_t>(options_.mean.size());
  const bool hwc = options_.input_layout == ImageLayout::kHWC;
  if (spec.dtype != DType::kUInt8 || spec.shape.size() != 3 ||
      spec.variable_length || spec.shape[hwc ? 2 : 0] != channels) {
    return absl::InvalidArgumentError(
        absl::StrCat("input field '", spec.ToString(),
                     spec.variable_length ? "' (variable-length)" : "'", ": ",
                     Expected(options_)));
  }
  const int64_t height = spec.shape[hwc ? 0 : 1];
  const int64_t width = spec.shape[hwc ? 1 : 2];
  return SampleLayout::Create({{.name = options_.output_field,
                                .dtype = options_.output_dtype,
                                .shape = {channels, height, width}}});
}

absl::Status NormalizeImage::Run(const DeviceTransformBatch& batch,
                                 const Stream& stream) const {
  const FieldView* in = nullptr;
  for (const FieldView& field : batch.input) {
    if (field.name == options_.field) in = &field;
  }
  if (in == nullptr || batch.output.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the batch has no field '", options_.field,
                     "' (Run() called without OutputLayout())"));
  }
  const bool hwc = options_.input_layout == ImageLayout::kHWC;
  const int channels = static_cast<int>(options_.mean.size());
  const int64_t height = in->shape[hwc ? 1 : 2];
  const int64_t width = in->shape[hwc ? 2 : 3];
  NormalizeConstants constants{};
  for (int c = 0; c < channels; ++c) {
    constants.mean[c] = options_.mean[c];
    constants.scale[c] = scale_[c];
  }
  const NormalizeOutput kind =
      options_.output_dtype == DType::kFloat32   ? NormalizeOutput::kFloat32
      : options_.output_dtype == DType::kFloat16 ? NormalizeOutput::kFloat16
                                                 : NormalizeOutput::kBFloat16;
  const auto* input = static_cast<const uint8_t*>(in->data);
  void* output = batch.output[0].data;
  const int64_t samples = batch.samples;
  auto launch = [&] {
#ifdef PINWHEEL_HAVE_CUDA
    return LaunchStatus(internal::LaunchNormalizeImage(
                            input, hwc, samples, channels, height, width,
                            constants, kind, output, stream.native_handle()),
                        "normalize_image");
#else
    return absl::OkStatus();  // never called: no CUDA backend
#endif
  };
  return internal::EnqueueTransformWork(stream, launch, [=] {
    const int64_t plane = height * width;
    switch (kind) {
      case NormalizeOutput::kFloat32: {
        auto* out = static_cast<float*>(output);
        NormalizeOnHost(input, hwc, samples, channels, plane, constants,
                        [out](int64_t i, float v) { out[i] = v; });
        break;
      }
      case NormalizeOutput::kFloat16: {
        auto* out = static_cast<uint16_t*>(output);
        NormalizeOnHost(input, hwc, samples, channels, plane, constants,
                        [out](int64_t i, float v) {
                          out[i] = internal::FloatToHalfBits(v);
                        });
        break;
      }
      case NormalizeOutput::kBFloat16: {
        auto* out = static_cast<uint16_t*>(output);
        NormalizeOnHost(input, hwc, samples, channels, plane, constants,
                        [out](int64_t i, float v) {
                          out[i] = internal::FloatToBFloat16Bits(v);
                        });
        break;
      }
    }
  });
}

}  // namespace pinwheel
