// PackedTokenDataset: see packed_token_dataset.h.
#include "loader/packed_token_dataset.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

#include "loader/internal/mapped_file.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

static_assert(std::endian::native == std::endian::little,
              "token and offsets files are little-endian");

template <typename T>
int64_t Load(const std::byte* data, int64_t i) {
  T value;
  std::memcpy(&value, data + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return static_cast<int64_t>(value);
}

// Widens tokens [start, start + n) of `data` into `out`.
template <typename T>
void Widen(const std::byte* data, int64_t start, int64_t n, int64_t* out) {
  const std::byte* src = data + start * static_cast<int64_t>(sizeof(T));
  for (int64_t i = 0; i < n; ++i) {
    T value;
    std::memcpy(&value, src + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    out[i] = static_cast<int64_t>(value);
  }
}

absl::Status BadOption(const std::string& path, absl::string_view option,
                       int64_t value, absl::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": option '", option, "' = ", value, ": ", rule));
}

absl::Status ValidateOptions(const std::string& path,
                             const PackedTokenOptions& o) {
  if (o.token_bytes != 1 && o.token_bytes != 2 && o.token_bytes != 4 &&
      o.token_bytes != 8) {
    return BadOption(path, "token_bytes", o.token_bytes,
                     "must be 1, 2, 4 or 8");
  }
  if (o.seq_len < 1 || o.seq_len >= (int64_t{1} << 30)) {
    return BadOption(path, "seq_len", o.seq_len, "must be in 1..2^30-1");
  }
  const bool eos = o.eos_id != -1;
  if (eos == !o.offsets_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": give exactly one of the options 'eos_id' (now ",
                     o.eos_id, ") and 'offsets_path' (now \"", o.offsets_path,
                     "\") to mark document boundaries"));
  }
  if (eos) {
    const int bits = 8 * o.token_bytes;
    const int64_t max = o.token_bytes == 8 ? INT64_MAX
                        : o.signed_tokens  ? (int64_t{1} << (bits - 1)) - 1
                                           : (int64_t{1} << bits) - 1;
    if (o.eos_id < 0 || o.eos_id > max) {
      return BadOption(path, "eos_id", o.eos_id,
                       absl::StrCat("must be a token value in 0..", max,
                                    " for ", o.token_bytes, "-byte tokens"));
    }
  }
  return absl::OkStatus();
}

// Reads the document starts of an offsets file (see PackedTokenOptions).
absl::StatusOr<std::vector<int64_t>> ReadOffsets(const std::string& path,
                                                 int64_t tokens) {
  PINWHEEL_ASSIGN_OR_RETURN(internal::MappedFile file,
                            internal::MappedFile::OpenUnmapped(path));
  if (file.size() % 8 != 0 || file.size() < 16) {
    return absl::DataLossError(
        absl::StrCat(path,
                     ": an offsets file holds at least two little-endian u64 "
                     "entries (0 and the token count), but it has ",
                     file.size(), " bytes"));
  }
  const int64_t entries = static_cast<int64_t>(file.size() / 8);
  std::vector<std::byte> bytes(file.size());
  const absl::Span<std::byte> parts[] = {absl::MakeSpan(bytes)};
  PINWHEEL_RETURN_IF_ERROR(
      file.ReadInto(0, parts, "the offsets from entry", 0));
  std::vector<int64_t> starts(static_cast<size_t>(entries));
  for (int64_t e = 0; e < entries; ++e) {
    const auto value = static_cast<uint64_t>(Load<uint64_t>(bytes.data(), e));
    const int64_t previous = e == 0 ? 0 : starts[static_cast<size_t>(e - 1)];
    if ((e == 0 && value != 0) || value < static_cast<uint64_t>(previous) ||
        value > static_cast<uint64_t>(tokens) ||
        (e == entries - 1 && value != static_cast<uint64_t>(tokens))) {
      return absl::DataLossError(absl::StrCat(
          path, ": entry ", e, " = ", value,
          ": offsets must start at 0, never decrease and end at the token "
          "file's ",
          tokens, " tokens"));
    }
    starts[static_cast<size_t>(e)] = static_cast<int64_t>(value);
  }
  return starts;
}

}  // namespace

absl::StatusOr<std::shared_ptr<PackedTokenDataset>> PackedTokenDataset::Open(
    const std::string& path, const PackedTokenOptions& options) {
  PINWHEEL_RETURN_IF_ERROR(ValidateOptions(path, options));
  const std::vector<int64_t> seq = {options.seq_len};
  const std::vector<int64_t> seq1 = {options.seq_len + 1};
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create({
      {.name = "input", .dtype = DType::kInt64, .shape = seq},
      {.name = "target", .dtype = DType::kInt64, .shape = seq},
      {.name = "position_ids", .dtype = DType::kInt64, .shape = seq},
      {.name = "document_ids", .dtype = DType::kInt64, .shape = seq},
      {.name = "cu_seqlens", .dtype = DType::kInt32, .shape = seq1},
  });
  if (!layout.ok()) {
    return BadOption(
        path, "seq_len", options.seq_len,
        absl::StrCat("gives no valid layout: ", layout.status().message()));
  }
  // Read with pread, never mapped (Note [mapping hazard] in
  // loader/internal/mapped_file.h): a file truncated in place while read is
  // DataLoss naming it and the range, never SIGBUS.
  PINWHEEL_ASSIGN_OR_RETURN(internal::MappedFile file,
                            internal::MappedFile::OpenUnmapped(path));
  const auto token_bytes = static_cast<size_t>(options.token_bytes);
  if (file.size() % token_bytes != 0 || file.size() == 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": file size ", file.size(),
        " bytes is not a positive multiple of ", token_bytes, "-byte tokens"));
  }
  const auto tokens = static_cast<int64_t>(file.size() / token_bytes);
  std::shared_ptr<PackedTokenDataset> dataset(new PackedTokenDataset(
      path, options, *std::move(layout),
      std::make_unique<internal::MappedFile>(std::move(file)), tokens));
  std::vector<int64_t> starts;
  if (!options.offsets_path.empty()) {
    PINWHEEL_ASSIGN_OR_RETURN(starts,
                              ReadOffsets(options.offsets_path, tokens));
  } else {
    starts.push_back(0);
    // The file in chunks of 1 Mi tokens.
    constexpr int64_t kChunk = int64_t{1} << 20;
    std::vector<std::byte> chunk;
    for (int64_t first = 0; first < tokens; first += kChunk) {
      const int64_t n = std::min(kChunk, tokens - first);
      chunk.resize(static_cast<size_t>(n) * token_bytes);
      const absl::Span<std::byte> parts[] = {absl::MakeSpan(chunk)};
      PINWHEEL_RETURN_IF_ERROR(dataset->file_->ReadInto(
          static_cast<uint64_t>(first) * token_bytes, parts,
          "the end-of-document scan at token", first));
      for (int64_t t = 0; t < n; ++t) {
        if (dataset->Token(chunk.data(), t) == options.eos_id) {
          starts.push_back(first + t + 1);
        }
      }
    }
    if (starts.back() != tokens) starts.push_back(tokens);
  }
  dataset->Pack(starts);
  return dataset;
}

PackedTokenDataset::PackedTokenDataset(
    std::string path, PackedTokenOptions options, SampleLayout layout,
    std::unique_ptr<internal::MappedFile> file, int64_t tokens)
    : path_(std::move(path)),
      options_(std::move(options)),
      layout_(std::move(layout)),
      file_(std::move(file)),
      tokens_(tokens) {}

PackedTokenDataset::~PackedTokenDataset() = default;

int64_t PackedTokenDataset::Token(const std::byte* data,
                                  int64_t position) const {
  switch (options_.token_bytes) {
    case 1:
      return options_.signed_tokens ? Load<int8_t>(data, position)
                                    : Load<uint8_t>(data, position);
    case 2:
      return options_.signed_tokens ? Load<int16_t>(data, position)
                                    : Load<uint16_t>(data, position);
    case 4:
      return options_.signed_tokens ? Load<int32_t>(data, position)
                                    : Load<uint32_t>(data, position);
    default:
      return Load<int64_t>(data, position);
  }
}

void PackedTokenDataset::WidenTokens(const std::byte* data, int64_t start,
                                     int64_t n, int64_t* out) const {
  switch (options_.token_bytes) {
    case 1:
      return options_.signed_tokens ? Widen<int8_t>(data, start, n, out)
                                    : Widen<uint8_t>(data, start, n, out);
    case 2:
      return options_.signed_tokens ? Widen<int16_t>(data, start, n, out)
                                    : Widen<uint16_t>(data, start, n, out);
    case 4:
      return options_.signed_tokens ? Widen<int32_t>(data, start, n, out)
                                    : Widen<uint32_t>(data, start, n, out);
    default:
      return Widen<int64_t>(data, start, n, out);
  }
}

void PackedTokenDataset::Pack(const std::vector<int64_t>& starts) {
  const int64_t seq_len = options_.seq_len;
  const auto in_file = static_cast<int64_t>(starts.size()) - 1;
  row_begin_.push_back(0);
  int64_t fill = 0;  // tokens in the row being packed
  for (int64_t d = 0; d < in_file; ++d) {
    int64_t start = starts[static_cast<size_t>(d)];
    const int64_t end = starts[static_cast<size_t>(d + 1)];
    if (end > start) ++documents_;  // an empty one is skipped, not counted
    while (start < end) {
      const int64_t length = std::min(end - start, seq_len);
      if (fill + length > seq_len) {  // does not fit: the next row
        row_begin_.push_back(static_cast<int64_t>(pieces_.size()));
        fill = 0;
      }
      pieces_.push_back({.document = d,
                         .start = start,
                         .length = length,
                         .document_end = end});
      fill += length;
      start += length;
    }
  }
  if (fill > 0) row_begin_.push_back(static_cast<int64_t>(pieces_.size()));
}

absl::Status PackedTokenDataset::Read(int64_t index, SampleView& out) const {
  if (index < 0 || index >= size()) {
    return absl::OutOfRangeError(
        absl::StrCat(path_, ": row ", index, " is outside [0, ", size(), ")"));
  }
  const auto seq_len = static_cast<size_t>(options_.seq_len);
  if (out.layout().num_fields() != 5 ||
      out.field_as<int64_t>(0).size() != seq_len ||
      out.field_as<int32_t>(4).size() != seq_len + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": the sample view is not this dataset's layout (",
                     layout_.ToString(), ")"));
  }
  const absl::Span<int64_t> input = out.field_as<int64_t>(0);
  const absl::Span<int64_t> target = out.field_as<int64_t>(1);
  const absl::Span<int64_t> positions = out.field_as<int64_t>(2);
  const absl::Span<int64_t> documents = out.field_as<int64_t>(3);
  const absl::Span<int32_t> cu_seqlens = out.field_as<int32_t>(4);
  const uint64_t token_bytes = static_cast<uint64_t>(options_.token_bytes);
  size_t fill = 0;
  size_t piece_number = 0;
  cu_seqlens[0] = 0;
  for (int64_t p = row_begin_[static_cast<size_t>(index)];
       p < row_begin_[static_cast<size_t>(index) + 1]; ++p) {
    const Piece& piece = pieces_[static_cast<size_t>(p)];
    // The piece and its last target, if the document goes on.
    const int64_t last =
        std::min(piece.start + piece.length + 1, piece.document_end);
    // The piece's bytes by pread (see Open), in a buffer each thread keeps.
    thread_local std::vector<std::byte> raw;
    raw.resize(static_cast<size_t>(last - piece.start) * token_bytes);
    const absl::Span<std::byte> parts[] = {absl::MakeSpan(raw)};
    PINWHEEL_RETURN_IF_ERROR(file_->ReadInto(
        static_cast<uint64_t>(piece.start) * token_bytes, parts, "row", index));
    // One widening pass per piece; the target is the input shifted by one
    // within the piece, and at its end the document's next token or none.
    WidenTokens(raw.data(), 0, piece.length, input.data() + fill);
    std::memcpy(target.data() + fill, input.data() + fill + 1,
                static_cast<size_t>(piece.length - 1) * sizeof(int64_t));
    const int64_t after = piece.start + piece.length;
    target[fill + static_cast<size_t>(piece.length) - 1] =
        after < piece.document_end ? Token(raw.data(), piece.length)
                                   : options_.ignore_index;
    for (int64_t i = 0; i < piece.length; ++i) {
      positions[fill + static_cast<size_t>(i)] = i;
      documents[fill + static_cast<size_t>(i)] = piece.document;
    }
    fill += static_cast<size_t>(piece.length);
    cu_seqlens[++piece_number] = static_cast<int32_t>(fill);
  }
  for (size_t i = fill; i < seq_len; ++i) {
    input[i] = options_.pad_id;
    target[i] = options_.ignore_index;
    positions[i] = 0;
    documents[i] = -1;
  }
  for (size_t k = piece_number + 1; k <= seq_len; ++k) {
    cu_seqlens[k] = static_cast<int32_t>(fill);
  }
  return absl::OkStatus();
}

}  // namespace pinwheel
