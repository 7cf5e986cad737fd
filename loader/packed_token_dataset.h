// PackedTokenDataset: fixed [seq_len] rows packed from whole documents of a
// flat token file, for fine-tuning and pretraining without attention across
// documents. Documents end at each end-of-sequence token (eos_id, kept as
// the document's last token) or at the boundaries of an offsets file next
// to the tokens. Rows are filled greedily in file order: a document goes
// whole into the current row if it fits, else starts the next row; one
// longer than seq_len is split into pieces of seq_len (its last piece packs
// like a document). The tail of a row is padding.
//
// Sample i (row i; a pure function of i, so the loader's order, checkpoint
// and elastic resume apply unchanged) holds:
//   "input"        i64[seq_len]  the tokens; pad_id in the padding
//   "target"       i64[seq_len]  each token's successor in its document
//                                (ignore_index at a document's last token
//                                and in the padding): never across documents
//   "position_ids" i64[seq_len]  0, 1, ... restarting at every piece (a
//                                document, or a piece of a split one); 0 in
//                                the padding
//   "document_ids" i64[seq_len]  the document's number in the file; -1 in
//                                the padding
//   "cu_seqlens"   i32[seq_len + 1]  piece boundaries in the row: 0, end of
//                                the first piece, ...; past the last piece
//                                it repeats the filled length (zero-length
//                                sequences), the fixed-shape form of
//                                flash-attention's varlen cu_seqlens
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<PackedTokenDataset> packed,
//       PackedTokenDataset::Open("sft.bin", {.token_bytes = 2,
//                                            .seq_len = 2048,
//                                            .eos_id = 50256}));
//   LoaderBuilder(packed).batch_size(8).shuffle(7).Build();
//
// Open() reads the boundaries once (with eos_id, a scan of every token:
// about a second per GB of tokens) and keeps 32 bytes per piece and 8 per
// row; Read() touches only its row's tokens.
#ifndef PINWHEEL_LOADER_PACKED_TOKEN_DATASET_H_
#define PINWHEEL_LOADER_PACKED_TOKEN_DATASET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "transfer/sample_layout.h"

namespace pinwheel {
namespace internal {
class MappedFile;
}  // namespace internal

struct PackedTokenOptions {
  // Bytes per token in the file: 1, 2, 4 (unsigned unless signed_tokens)
  // or 8 (i64), little-endian, as TokenWindowDataset.
  int token_bytes = 2;
  bool signed_tokens = false;
  // Tokens per row. 1 .. 2^30 - 1.
  int64_t seq_len = 1024;
  // Document boundaries: exactly one of the two.
  // A token value that ends a document (>= 0; it stays in the document).
  int64_t eos_id = -1;
  // A file of little-endian u64 token offsets, documents + 1 entries:
  // 0, end of document 0, ..., the token count; non-decreasing (an empty
  // document is skipped).
  std::string offsets_path;
  // What the padding holds in "input" and "target".
  int64_t pad_id = 0;
  int64_t ignore_index = -100;
};

// Thread-safe (immutable). The token and offsets files are read with
// pread(2), never mapped: a file truncated in place while read (at Open or
// in Read) is DataLoss naming the file and the byte range, never SIGBUS.
// Replace such files by rename() all the same: a rewrite in place changes
// the rows under a running loader.
class PackedTokenDataset final : public Dataset {
 public:
  // Opens and packs `path`: NotFound; InvalidArgument for bad options
  // (naming the option, its value and the rule); DataLoss for a file size
  // that is not a multiple of token_bytes, an empty file, or an offsets
  // file that is not whole u64s, does not start at 0, decreases or does
  // not end at the token count (naming the entry and its value).
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<PackedTokenDataset>> Open(
      const std::string& path, const PackedTokenOptions& options);

  ~PackedTokenDataset() override;

  // Rows.
  int64_t size() const override {
    return static_cast<int64_t>(row_begin_.size()) - 1;
  }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override;

  int64_t tokens() const { return tokens_; }
  // Returns the documents that hold tokens (an empty one, two equal
  // offsets, is skipped and not counted).
  int64_t documents() const { return documents_; }
  const PackedTokenOptions& options() const { return options_; }

 private:
  // A run of one document's tokens placed in a row.
  struct Piece {
    int64_t document;
    int64_t start;         // first token in the file
    int64_t length;        // tokens in the row
    int64_t document_end;  // one past the document's last token
  };
  PackedTokenDataset(std::string path, PackedTokenOptions options,
                     SampleLayout layout,
                     std::unique_ptr<internal::MappedFile> file,
                     int64_t tokens);
  // Packs the documents [starts[d], starts[d + 1]).
  void Pack(const std::vector<int64_t>& starts);
  // Returns token `position` of `data` (tokens of this file's width).
  int64_t Token(const std::byte* data, int64_t position) const;
  // Widens tokens [start, start + n) of `data` into `out`.
  void WidenTokens(const std::byte* data, int64_t start, int64_t n,
                   int64_t* out) const;

  std::string path_;
  PackedTokenOptions options_;
  SampleLayout layout_;
  std::unique_ptr<internal::MappedFile> file_;  // never null; not mapped
  int64_t tokens_;
  int64_t documents_ = 0;
  std::vector<Piece> pieces_;
  std::vector<int64_t> row_begin_;  // row r's pieces: [row_begin_[r], [r+1])
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_PACKED_TOKEN_DATASET_H_
