// WidenTokens: the device stage's token widening. A batch field of token
// windows, [seq_len + 1] tokens of 1, 2, 4 or 8 bytes each (u16 for a GPT-2
// token file: TokenWindowDataset's TokenOutput::kWindow), becomes the int64
// `input` = windows[:, :-1] and `target` = windows[:, 1:] on the device: the
// copy moves 2 bytes a token instead of the 16 of two widened fields. Signed
// tokens are sign-extended. The CUDA kernel and the host loop (the host
// backend) produce the same values.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<WidenTokens> widen,
//                             WidenTokens::Create({.field = "tokens"}));
//   LoaderBuilder(token_windows).batch_size(32).device_transform(widen)...
//   // batch.field("input"), batch.field("target"): i64[32, seq_len].
#ifndef PINWHEEL_TRANSFER_WIDEN_TOKENS_H_
#define PINWHEEL_TRANSFER_WIDEN_TOKENS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "transfer/device_transform.h"
#include "transfer/sample_layout.h"
#include "transfer/stream.h"

namespace pinwheel {

struct WidenTokensOptions {
  // The input field: [seq_len + 1] integers (u8, i8, u16, i16, u32, i32,
  // u64 or i64), seq_len >= 1, not variable-length.
  std::string field = "tokens";
  // The two i64[seq_len] output fields; distinct, non-empty.
  std::string input_field = "input";
  std::string target_field = "target";
};

// Immutable; thread-safe.
class WidenTokens final : public DeviceTransform {
 public:
  // Returns the transform, or InvalidArgument naming the option and rule.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<WidenTokens>> Create(
      WidenTokensOptions options);

  std::string name() const override { return "widen_tokens"; }
  // InvalidArgument when the field is missing, not an integer, not of rank
  // 1 with at least 2 tokens, or variable-length.
  absl::StatusOr<SampleLayout> OutputLayout(
      const BatchLayout& input) const override;
  bool Consumes(absl::string_view name) const override {
    return name == options_.field;
  }
  absl::Status Run(const DeviceTransformBatch& batch,
                   const Stream& stream) const override;

 private:
  explicit WidenTokens(WidenTokensOptions options)
      : options_(std::move(options)) {}

  const WidenTokensOptions options_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_WIDEN_TOKENS_H_
