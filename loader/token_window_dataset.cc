#include "loader/token_window_dataset.h"

#include <bit>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <memory>
#include <sys/mman.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/epoch_order.h"
#include "loader/internal/file_copy.h"
#include "loader/internal/mapped_file.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

// Token files are little-endian; Read() loads them with plain loads.
static_assert(std::endian::native == std::endian::little,
              "token files are little-endian; big-endian hosts would need a "
              "byte swap in Widen()");

// Widens `n` little-endian tokens of type T at `src` into `dst`.
// Note [widening loop]: blocks of a constant 16 tokens let the compiler's
// straight-line (SLP) vectoriser turn each block into a few SIMD unpacks
// even at -O2, where GCC's loop vectoriser leaves a variable-count loop
// scalar; the tail is a plain loop. A Read widens 2 × seq_len tokens, so
// this is most of its cost.
//
// Note [streaming stores into the slot]
// A widened window goes to a pinned slot that the CPU never reads again:
// the copy engine reads it from memory. Plain stores first read each line
// into the cache (a read for ownership), so W2's 0.5 MB a batch cost the
// memory bus three passes (read for ownership, write-back, the copy's
// read); non-temporal stores write the lines whole, two passes. At W2's
// rate (14 workers, 40-80 k batches a second on one H200) that is 20-40
// GB/s of reads fewer. Measured (one H200, 16 cores, both builds in one
// call, 3 repetitions x 2 rounds): 14 workers x 16 slots went from
// 37.4-39.6 k batches/s (every repetition in the slow mode, 383-399 us of
// CPU a batch) to 66.8-73.9 k (207-224 us); x 64 slots from 52.3-74.7 k to
// 64.2-73.5 k. On the 2-core host backend, where the "copy" is a memcpy
// that reads the slot back, it costs 5-10 %. Used for windows of kStreamTokens
// or more whose output is 16-byte aligned (a slot's fields are, unless a field
// before them ends off a 16-byte boundary); the fence at the end orders them
// before whatever hands the slot on.
constexpr int64_t kStreamTokens = 256;

template <typename T>
void Widen(const std::byte* __restrict src, int64_t n,
           int64_t* __restrict dst) {
  constexpr int64_t kBlock = 16;
  int64_t i = 0;
#if defined(__SSE2__)
  // Whole blocks streamed; the plain loop below then has none left, and the
  // tail is stored as usual.
  const bool stream =
      n >= kStreamTokens && reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  for (; stream && i + kBlock <= n; i += kBlock) {
    T block[kBlock];
    std::memcpy(block, src + i * static_cast<int64_t>(sizeof(T)),
                sizeof(block));
    alignas(16) int64_t wide[kBlock];
    for (int64_t k = 0; k < kBlock; ++k) {
      wide[k] = static_cast<int64_t>(block[k]);
    }
    for (int64_t k = 0; k < kBlock; k += 2) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + k),
                       _mm_load_si128(reinterpret_cast<__m128i*>(wide + k)));
    }
  }
#endif
  for (; i + kBlock <= n; i += kBlock) {
    T block[kBlock];
    std::memcpy(block, src + i * static_cast<int64_t>(sizeof(T)),
                sizeof(block));
    for (int64_t k = 0; k < kBlock; ++k) {
      dst[i + k] = static_cast<int64_t>(block[k]);
    }
  }
  for (; i < n; ++i) {
    T value;
    std::memcpy(&value, src + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    dst[i] = static_cast<int64_t>(value);
  }
#if defined(__SSE2__)
  if (stream) _mm_sfence();
#endif
}

absl::Status ValidateOptions(const std::string& path,
                             const TokenWindowOptions& options) {
  if (options.token_bytes != 1 && options.token_bytes != 2 &&
      options.token_bytes != 4 && options.token_bytes != 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": token_bytes ", options.token_bytes, " is not 1, 2, 4 or 8"));
  }
  if (options.seq_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": seq_len ", options.seq_len, " must be >= 1"));
  }
  // Any window this long exceeds a sample's 1 GiB; the bound also keeps
  // seq_len + 1 from overflowing.
  if (options.seq_len >= (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": seq_len ", options.seq_len,
                     " must be below 2^30 (a sample holds at most 1 GiB)"));
  }
  if (options.windows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": windows ", options.windows, " must be >= 0"));
  }
  if (options.output != TokenOutput::kInputAndTargetInt64 &&
      options.output != TokenOutput::kWindow) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": output ", static_cast<int>(options.output),
        " is not TokenOutput::kInputAndTargetInt64 (0) or kWindow (1)"));
  }
  return absl::OkStatus();
}

std::vector<FieldSpec> Fields(const TokenWindowOptions& options) {
  if (options.output == TokenOutput::kWindow) {
    return {{.name = "tokens",
             .dtype = TokenWindowDType(options),
             .shape = {options.seq_len + 1}}};
  }
  return {
      {.name = "input", .dtype = DType::kInt64, .shape = {options.seq_len}},
      {.name = "target", .dtype = DType::kInt64, .shape = {options.seq_len}}};
}

}  // namespace

DType TokenWindowDType(const TokenWindowOptions& options) {
  switch (options.token_bytes) {
    case 1:
      return options.signed_tokens ? DType::kInt8 : DType::kUInt8;
    case 2:
      return options.signed_tokens ? DType::kInt16 : DType::kUInt16;
    case 4:
      return options.signed_tokens ? DType::kInt32 : DType::kUInt32;
    default:
      return DType::kInt64;
  }
}

absl::StatusOr<std::shared_ptr<TokenWindowDataset>> TokenWindowDataset::Open(
    const std::string& path, const TokenWindowOptions& options) {
  if (absl::Status status = ValidateOptions(path, options); !status.ok()) {
    return status;
  }
  absl::StatusOr<SampleLayout> layout = SampleLayout::Create(Fields(options));
  if (!layout.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": seq_len ", options.seq_len,
                     " gives no valid layout: ", layout.status().message()));
  }

  absl::StatusOr<internal::MappedFile> file = internal::MappedFile::Open(path);
  if (!file.ok()) return file.status();
  const size_t map_bytes = file->size();
  const size_t token_bytes = static_cast<size_t>(options.token_bytes);
  if (map_bytes % token_bytes != 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": file size ", map_bytes, " bytes is not a multiple of ",
        token_bytes, "-byte tokens (", map_bytes % token_bytes,
        " trailing bytes)"));
  }
  const int64_t tokens = static_cast<int64_t>(map_bytes / token_bytes);
  if (tokens <= options.seq_len) {
    return absl::DataLossError(absl::StrCat(
        path, ": the file holds ", tokens, " tokens of ", token_bytes,
        " bytes, a window needs seq_len + 1 = ", options.seq_len + 1));
  }
  const int64_t windows =
      options.windows != 0 ? options.windows : tokens / (options.seq_len + 1);
  // Windows start anywhere: see Note [record access pattern] in
  // record_file.cc; a window is a few KiB, so read-ahead only wastes I/O.
  // Advice only: a failure changes nothing but read-ahead.
  ::madvise(const_cast<std::byte*>(file->data()), map_bytes, MADV_RANDOM);
  return std::shared_ptr<TokenWindowDataset>(new TokenWindowDataset(
      path, options, *std::move(layout),
      std::make_unique<internal::MappedFile>(*std::move(file)), tokens,
      windows));
}

TokenWindowDataset::TokenWindowDataset(
    std::string path, TokenWindowOptions options, SampleLayout layout,
    std::unique_ptr<internal::MappedFile> file, int64_t tokens, int64_t windows)
    : path_(std::move(path)),
      options_(options),
      layout_(std::move(layout)),
      file_(std::move(file)),
      gather_copy_(std::make_unique<internal::SharedFileCopy>()),
      tokens_(tokens),
      windows_(windows) {}

TokenWindowDataset::~TokenWindowDataset() = default;

// The start of window i is the first draw of its own SplitMix64 stream,
// keyed by (seed, i), mapped without bias onto the tokens - seq_len valid
// starts: order::WindowStart, which the device evaluates too.
int64_t TokenWindowDataset::WindowStart(int64_t index) const {
  return order::WindowStart(options_.seed, index,
                            static_cast<uint64_t>(tokens_ - options_.seq_len));
}

absl::Status TokenWindowDataset::Read(int64_t index, SampleView& out) const {
  if (index < 0 || index >= windows_) {
    return absl::OutOfRangeError(absl::StrCat(
        path_, ": window index ", index, " is outside [0, ", windows_, ")"));
  }
  const int64_t seq_len = options_.seq_len;
  const uint64_t token_bytes = static_cast<uint64_t>(options_.token_bytes);
  const uint64_t window_bytes =
      (static_cast<uint64_t>(seq_len) + 1) * token_bytes;
  if (options_.output == TokenOutput::kWindow) {
    if (out.layout().num_fields() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": the sample view has ", out.layout().num_fields(),
          " fields, a token window (output kWindow) has 1 (tokens)"));
    }
    const absl::Span<std::byte> tokens = out.field(0);
    if (tokens.size() != window_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": the sample view's field holds ", tokens.size(),
                       " bytes, a window of seq_len + 1 = ", seq_len + 1,
                       " tokens of ", token_bytes, " bytes is ", window_bytes));
    }
    const uint64_t offset =
        static_cast<uint64_t>(WindowStart(index)) * token_bytes;
    // Read, not copied from the mapping: a file truncated in place is
    // DataLoss, not SIGBUS (Note [mapping hazard]).
    return file_->ReadInto(offset, {tokens}, "window", index);
  }
  if (out.layout().num_fields() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": the sample view has ", out.layout().num_fields(),
                     " fields, a token window has 2 (input, target)"));
  }
  const absl::Span<int64_t> input = out.field_as<int64_t>(0);
  const absl::Span<int64_t> target = out.field_as<int64_t>(1);
  if (input.size() != static_cast<size_t>(seq_len) ||
      target.size() != static_cast<size_t>(seq_len)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": the sample view's fields hold ", input.size(),
                     " and ", target.size(), " tokens, seq_len is ", seq_len));
  }
  const uint64_t offset =
      static_cast<uint64_t>(WindowStart(index)) * token_bytes;
  // Read into this thread's buffer, not copied from the mapping: a file
  // truncated in place is DataLoss, not SIGBUS (Note [mapping hazard]).
  thread_local std::vector<std::byte> window;
  window.resize(window_bytes);
  PINWHEEL_RETURN_IF_ERROR(
      file_->ReadInto(offset, {absl::MakeSpan(window)}, "window", index));
  const std::byte* src = window.data();
  switch (options_.token_bytes) {
    case 1:
      if (options_.signed_tokens) {
        Widen<int8_t>(src, seq_len, input.data());
        Widen<int8_t>(src + 1, seq_len, target.data());
      } else {
        Widen<uint8_t>(src, seq_len, input.data());
        Widen<uint8_t>(src + 1, seq_len, target.data());
      }
      break;
    case 2:
      if (options_.signed_tokens) {
        Widen<int16_t>(src, seq_len, input.data());
        Widen<int16_t>(src + 2, seq_len, target.data());
      } else {
        Widen<uint16_t>(src, seq_len, input.data());
        Widen<uint16_t>(src + 2, seq_len, target.data());
      }
      break;
    case 4:
      if (options_.signed_tokens) {
        Widen<int32_t>(src, seq_len, input.data());
        Widen<int32_t>(src + 4, seq_len, target.data());
      } else {
        Widen<uint32_t>(src, seq_len, input.data());
        Widen<uint32_t>(src + 4, seq_len, target.data());
      }
      break;
    default:  // 8: already int64.
      std::memcpy(input.data(), src, static_cast<size_t>(seq_len) * 8);
      std::memcpy(target.data(), src + 8, static_cast<size_t>(seq_len) * 8);
      break;
  }
  return absl::OkStatus();
}

absl::StatusOr<GatherSource> TokenWindowDataset::Gather(
    uint64_t max_copy_bytes) const {
  const uint64_t token_bytes = static_cast<uint64_t>(options_.token_bytes);
  PINWHEEL_ASSIGN_OR_RETURN(
      std::shared_ptr<const internal::FileCopy> copy,
      gather_copy_->Get(*file_, static_cast<uint64_t>(tokens_) * token_bytes,
                        max_copy_bytes));
  GatherSource source;
  source.regions = {copy->bytes()};
  source.owner = copy;
  source.owns_pages = true;  // a FileCopy is page-aligned whole pages
  if (options_.output == TokenOutput::kWindow) {
    source.fields = {
        {.region = 0,
         .offset = 0,
         .stride = token_bytes,
         .bytes = static_cast<uint64_t>(options_.seq_len + 1) * token_bytes}};
  } else {
    source.kind = GatherSource::Kind::kWidenWindow;
    source.token_bytes = options_.token_bytes;
    source.signed_tokens = options_.signed_tokens;
    source.seq_len = options_.seq_len;
  }
  // The dataset outlives the loader's source (the loader holds both).
  source.key = [this](int64_t index) { return WindowStart(index); };
  source.window_keys = GatherSource::WindowKeys{
      .seed = options_.seed,
      .starts = static_cast<uint64_t>(tokens_ - options_.seq_len)};
  return source;
}

}  // namespace pinwheel
