// NormalizeImage: the device stage's image normalisation. A u8 image field,
// HWC or CHW, becomes a CHW f32, f16 or bf16 field with per-channel mean and
// std taken out: out[c][y][x] = (in - mean[c]) * (1 / std[c]), computed in
// f32 with one rounding per operation (no fused multiply-add), then rounded
// to nearest even to f16 / bf16. The CUDA kernel and the host loop (the
// host backend) produce the same bits for every dtype.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<NormalizeImage> normalize,
//       NormalizeImage::Create({.field = "image",
//                               .input_layout = ImageLayout::kHWC,
//                               .output_dtype = DType::kBFloat16,
//                               .mean = {123.675f, 116.28f, 103.53f},
//                               .std = {58.395f, 57.12f, 57.375f}}));
//   LoaderBuilder(dataset).batch_size(256).device_transform(normalize)...
//   // batch.field("image"): bf16[256, 3, H, W]; the other fields as read.
#ifndef PINWHEEL_TRANSFER_NORMALIZE_IMAGE_H_
#define PINWHEEL_TRANSFER_NORMALIZE_IMAGE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "transfer/device_transform.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"

namespace pinwheel {

// How an image field's dimensions are ordered.
enum class ImageLayout { kHWC, kCHW };

struct NormalizeImageOptions {
  // The input field: u8 [H, W, C] (kHWC) or [C, H, W] (kCHW).
  std::string field = "image";
  ImageLayout input_layout = ImageLayout::kHWC;
  // kFloat32, kFloat16 or kBFloat16; the output is always CHW.
  DType output_dtype = DType::kFloat32;
  // Per channel, in the input's units (0..255); C values each, 1 <= C <= 16.
  // mean finite; std finite and > 0.
  std::vector<float> mean;
  std::vector<float> std;
  // The output field's name; empty: the input's (which it replaces).
  std::string output_field;
};

// Immutable; thread-safe.
class NormalizeImage final : public DeviceTransform {
 public:
  // Returns the transform, or InvalidArgument naming the option and rule.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<NormalizeImage>> Create(
      NormalizeImageOptions options);

  std::string name() const override { return "normalize_image"; }
  // InvalidArgument when the input field is missing, not u8, not of rank 3,
  // variable-length, or its channel dimension is not mean.size().
  absl::StatusOr<SampleLayout> OutputLayout(
      const BatchLayout& input) const override;
  bool Consumes(absl::string_view name) const override {
    return name == options_.field;
  }
  absl::Status Run(const DeviceTransformBatch& batch,
                   const Stream& stream) const override;

  const NormalizeImageOptions& options() const { return options_; }

 private:
  explicit NormalizeImage(NormalizeImageOptions options);

  const NormalizeImageOptions options_;
  std::vector<float> scale_;  // 1 / std
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_NORMALIZE_IMAGE_H_
