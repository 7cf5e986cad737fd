// TokenWindowDataset: nanoGPT-style language-model batches from a flat
// binary file of tokens (no header; little-endian integers of one width).
// Sample i is a window of seq_len + 1 tokens starting at a position drawn
// from (seed, i). Two outputs (TokenWindowOptions::output):
//   kInputAndTargetInt64 (default): field "input" holds tokens [p, p+seq_len)
//     and "target" tokens [p+1, p+seq_len], both widened to int64 on the CPU
//     (16 KiB a sample for seq_len 1024, whatever the file's token width).
//   kWindow: one field "tokens" holds the seq_len + 1 tokens [p, p+seq_len]
//     in the file's own dtype (u16 for 2-byte unsigned tokens; see
//     TokenWindowOptions), copied with one memcpy: 8x fewer bytes to copy to
//     the GPU for u16. The consumer then makes input = tokens[:, :-1] and
//     target = tokens[:, 1:] on the device (two views of the same batch) and
//     widens them there if its model wants int64.
// The same (seed, index) gives the same window in both outputs.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<TokenWindowDataset> ds,
//       TokenWindowDataset::Open("train.bin", {.token_bytes = 2,
//                                              .seq_len = 1024}));
//   // Windows as u16[1025], widened on the GPU by the consumer:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<TokenWindowDataset> windows,
//       TokenWindowDataset::Open("train.bin",
//           {.token_bytes = 2, .seq_len = 1024,
//            .output = TokenOutput::kWindow}));
//   // Per batch, in PyTorch (field "tokens" is u16[B, 1025] on the GPU; a
//   // PyTorch with torch.uint16 reads it through DLPack):
//   //   t = tokens.long()                    # widened on the GPU
//   //   input, target = t[:, :-1], t[:, 1:]  # views, no copy
//   // or in C++: samples/bench/widen_tokens.h's LaunchWidenTokenWindows()
//   // on the consumer stream after DeviceBatch::WaitOn(), reading
//   // batch.field(0).data.
#ifndef PINWHEEL_LOADER_TOKEN_WINDOW_DATASET_H_
#define PINWHEEL_LOADER_TOKEN_WINDOW_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "transfer/sample_layout.h"

namespace pinwheel {
namespace internal {
class MappedFile;
class SharedFileCopy;
}  // namespace internal

// What one sample of a TokenWindowDataset holds (see the file comment).
enum class TokenOutput {
  // "input" and "target", i64[seq_len] each, widened on the CPU.
  kInputAndTargetInt64,
  // "tokens", [seq_len + 1] in the file's dtype: u8, i8, u16, i16, u32, i32
  // (token_bytes and signed_tokens) or i64 (8-byte tokens), not widened.
  kWindow,
};

struct TokenWindowOptions {
  // Bytes per token in the file: 1 (u8), 2 (u16), 4 (i32/u32 read as
  // unsigned u32 unless signed_tokens) or 8 (i64).
  int token_bytes = 2;
  bool signed_tokens = false;
  // Tokens of input and of target (a kWindow sample holds seq_len + 1).
  // >= 1 and < 2^30.
  int64_t seq_len = 1024;
  // Windows per epoch: 0 means tokens / (seq_len + 1) (non-overlapping
  // coverage on average). >= 0; any int64 works (2^62 windows cost nothing
  // here: a window's start is computed from its index, nothing is stored
  // per window).
  int64_t windows = 0;
  // Fixes the window start of each index: sample i always reads the same
  // window; the sampler's shuffle decides the order.
  uint64_t seed = 0;
  // kInputAndTargetInt64 (today's layout) or kWindow (the file's bytes; the
  // consumer shifts and widens on the device).
  TokenOutput output = TokenOutput::kInputAndTargetInt64;
};

// Returns the dtype of a kWindow sample's "tokens" field for these options
// (kUInt8/kInt8/kUInt16/kInt16/kUInt32/kInt32 as token_bytes and
// signed_tokens say; kInt64 for 8-byte tokens). REQUIRES: token_bytes is
// 1, 2, 4 or 8.
DType TokenWindowDType(const TokenWindowOptions& options);

// Thread-safe (immutable).
//
// The file is mapped whole (address space, not memory: a 1 TiB token file
// maps on a 64-bit host and pages are read on demand); every offset is
// 64-bit. Read() reads each window with pread(2), not out of the mapping:
// a file truncated or rewritten in place, before or during the read, is
// DataLoss naming the file, the window and its byte range, never SIGBUS
// (Note [mapping hazard] in loader/internal/mapped_file.h). Still replace
// a token file by rename() (the dataset keeps the old bytes), not in place:
// in place, reads see a mix of old and new bytes.
class TokenWindowDataset final : public Dataset {
 public:
  // Opens and maps `path`: NotFound; InvalidArgument for bad options (naming
  // the option, its value and the rule; an `output` that is no TokenOutput
  // enumerator included) or for a path that is not a regular file (naming
  // its type; a FIFO does not block); DataLoss when the file size is not a
  // multiple of token_bytes, or the file holds fewer than seq_len + 1 tokens
  // (naming both counts); ResourceExhausted when the mapping does not fit the
  // address space.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<TokenWindowDataset>> Open(
      const std::string& path, const TokenWindowOptions& options);

  ~TokenWindowDataset() override;

  int64_t size() const override { return windows_; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override;
  // The tokens from a copy of the file in memory (as RecordFileDataset's);
  // keys are window starts (WindowStart), the gather copies kWindow's
  // windows raw and widens kInputAndTargetInt64's, as Read() does.
  absl::StatusOr<GatherSource> Gather(uint64_t max_copy_bytes) const override;

  // Returns the first token position of window `index`.
  int64_t WindowStart(int64_t index) const;
  int64_t tokens() const { return tokens_; }
  const TokenWindowOptions& options() const { return options_; }

 private:
  TokenWindowDataset(std::string path, TokenWindowOptions options,
                     SampleLayout layout,
                     std::unique_ptr<internal::MappedFile> file, int64_t tokens,
                     int64_t windows);
  std::string path_;
  TokenWindowOptions options_;
  SampleLayout layout_;
  std::unique_ptr<internal::MappedFile> file_;             // never null
  std::unique_ptr<internal::SharedFileCopy> gather_copy_;  // never null
  int64_t tokens_;
  int64_t windows_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_TOKEN_WINDOW_DATASET_H_
