#include "transfer/widen_tokens.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "transfer/device_stage/transform_kernels.h"
#include "transfer/device_stage/transform_work.h"

#ifdef PINWHEEL_HAVE_CUDA
#include "pinning/base/cuda_status.h"
#endif

namespace pinwheel {
namespace {

bool IsSigned(DType dtype) {
  return dtype == DType::kInt8 || dtype == DType::kInt16 ||
         dtype == DType::kInt32 || dtype == DType::kInt64;
}

bool IsInteger(DType dtype) {
  return IsSigned(dtype) || dtype == DType::kUInt8 || dtype == DType::kUInt16 ||
         dtype == DType::kUInt32 || dtype == DType::kUInt64;
}

// The host backend's loop: the kernel's result, row by row.
template <typename T>
void WidenOnHost(const void* windows, int64_t batch, int64_t seq_len,
                 int64_t* input, int64_t* target) {
  const T* tokens = static_cast<const T*>(windows);
  for (int64_t b = 0; b < batch; ++b) {
    const T* row = tokens + b * (seq_len + 1);
    int64_t* in = input + b * seq_len;
    int64_t* out = target + b * seq_len;
    for (int64_t k = 0; k < seq_len; ++k) {
      in[k] = static_cast<int64_t>(row[k]);
      out[k] = static_cast<int64_t>(row[k + 1]);
    }
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<WidenTokens>> WidenTokens::Create(
    WidenTokensOptions options) {
  auto bad = [](absl::string_view option, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("widen_tokens: option '", option, "': ", why));
  };
  if (options.field.empty()) return bad("field", "must name a field");
  if (options.input_field.empty()) return bad("input_field", "is empty");
  if (options.target_field.empty()) return bad("target_field", "is empty");
  if (options.input_field == options.target_field) {
    return bad("target_field",
               absl::StrCat("'", options.target_field,
                            "' is also input_field: the outputs need two "
                            "names"));
  }
  return std::shared_ptr<WidenTokens>(new WidenTokens(std::move(options)));
}

absl::StatusOr<SampleLayout> WidenTokens::OutputLayout(
    const BatchLayout& input) const {
  const SampleLayout& sample = input.sample();
  const int f = sample.FieldIndex(options_.field);
  const char* expected =
      "expected an integer field [seq_len + 1] (u8/i8/u16/i16/u32/i32/u64/"
      "i64) with seq_len >= 1";
  if (f < 0) {
    std::vector<std::string> names;
    for (const FieldSpec& spec : sample.fields()) {
      names.push_back(spec.ToString());
    }
    return absl::InvalidArgumentError(
        absl::StrCat("input field '", options_.field, "' is not in the batch (",
                     absl::StrJoin(names, ", "), "); ", expected));
  }
  const FieldSpec& spec = sample.fields()[f];
  if (!IsInteger(spec.dtype) || spec.shape.size() != 1 || spec.shape[0] < 2 ||
      spec.variable_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input field '", spec.ToString(),
        spec.variable_length ? "' (variable-length)" : "'", ": ", expected));
  }
  const int64_t seq_len = spec.shape[0] - 1;
  return SampleLayout::Create({{.name = options_.input_field,
                                .dtype = DType::kInt64,
                                .shape = {seq_len}},
                               {.name = options_.target_field,
                                .dtype = DType::kInt64,
                                .shape = {seq_len}}});
}

absl::Status WidenTokens::Run(const DeviceTransformBatch& batch,
                              const Stream& stream) const {
  const FieldView* tokens = nullptr;
  for (const FieldView& field : batch.input) {
    if (field.name == options_.field) tokens = &field;
  }
  if (tokens == nullptr || batch.output.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("the batch has no field '", options_.field,
                     "' (Run() called without OutputLayout())"));
  }
  const void* windows = tokens->data;
  const int token_bytes = static_cast<int>(DTypeSize(tokens->dtype));
  const bool signed_tokens = IsSigned(tokens->dtype);
  const int64_t seq_len = tokens->shape[1] - 1;
  const int64_t samples = batch.samples;
  auto* input = batch.output[0].data_as<int64_t>();
  auto* target = batch.output[1].data_as<int64_t>();
  auto launch = [&] {
#ifdef PINWHEEL_HAVE_CUDA
    return LaunchStatus(internal::LaunchWidenTokenWindows(
                            windows, token_bytes, signed_tokens, samples,
                            seq_len, input, target, stream.native_handle()),
                        "widen_tokens");
#else
    return absl::OkStatus();  // never called: no CUDA backend
#endif
  };
  return internal::EnqueueTransformWork(stream, launch, [=] {
    switch (token_bytes) {
      case 1:
        return signed_tokens ? WidenOnHost<int8_t>(windows, samples, seq_len,
                                                   input, target)
                             : WidenOnHost<uint8_t>(windows, samples, seq_len,
                                                    input, target);
      case 2:
        return signed_tokens ? WidenOnHost<int16_t>(windows, samples, seq_len,
                                                    input, target)
                             : WidenOnHost<uint16_t>(windows, samples, seq_len,
                                                     input, target);
      case 4:
        return signed_tokens ? WidenOnHost<int32_t>(windows, samples, seq_len,
                                                    input, target)
                             : WidenOnHost<uint32_t>(windows, samples, seq_len,
                                                     input, target);
      default:
        return WidenOnHost<int64_t>(windows, samples, seq_len, input, target);
    }
  });
}

}  // namespace pinwheel
