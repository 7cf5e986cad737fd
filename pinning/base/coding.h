// Little-endian encoding of fixed-width values, and a bounded reader for
// them: the one byte codec of pinwheel's file formats (the record file
// header, LoaderCheckpoint, the sample trainer's checkpoint).
//
// Writing appends to a std::string or a std::vector<std::byte>. Reading
// checks every read against the end of the bytes before it touches them; a
// read that would pass the end reads nothing and returns the Status that the
// caller's wording function makes of the shortfall, so that each format
// keeps its own error messages.
//
// Example:
//   std::string out;
//   PutLittleEndian<uint32_t>(out, version);
//   PutLittleEndian<int64_t>(out, epoch);
//   ...
//   absl::Status Truncated(const Shortfall& s) {
//     return absl::DataLossError(absl::StrCat(
//         "truncated: ", s.field, " at byte ", s.offset, " needs ", s.needed,
//         " bytes, the input ends at byte ", s.size));
//   }
//   LittleEndianReader reader(out, Truncated);
//   uint32_t version = 0;
//   PINWHEEL_RETURN_IF_ERROR(reader.Read("version", version));
//
// The encoding does not depend on the host's byte order: values are taken
// apart and put together with shifts. Floating-point values are encoded as
// the unsigned integer of the same size holding their bits (IEEE 754).
#ifndef PINWHEEL_PINNING_BASE_CODING_H_
#define PINWHEEL_PINNING_BASE_CODING_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pinwheel {
namespace coding_internal {

template <size_t kBytes>
struct UnsignedOfSize;
template <>
struct UnsignedOfSize<1> {
  using Type = uint8_t;
};
template <>
struct UnsignedOfSize<2> {
  using Type = uint16_t;
};
template <>
struct UnsignedOfSize<4> {
  using Type = uint32_t;
};
template <>
struct UnsignedOfSize<8> {
  using Type = uint64_t;
};

// The values the codec takes: integers (not bool), float and double.
template <typename T>
inline constexpr bool kCodable =
    (std::is_integral_v<T> && !std::is_same_v<T, bool>) ||
    std::is_same_v<T, float> || std::is_same_v<T, double>;

template <typename T>
using Bits = typename UnsignedOfSize<sizeof(T)>::Type;

}  // namespace coding_internal

// Writes `value` as sizeof(T) bytes at `dst`, least significant first.
// REQUIRES: `dst` has room for sizeof(T) bytes.
template <typename T>
void EncodeLittleEndian(T value, void* dst) {
  static_assert(coding_internal::kCodable<T>);
  const auto bits = std::bit_cast<coding_internal::Bits<T>>(value);
  unsigned char bytes[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) {
    bytes[i] = static_cast<unsigned char>(uint64_t{bits} >> (8 * i));
  }
  std::memcpy(dst, bytes, sizeof(T));
}

// Returns the T whose sizeof(T) bytes at `src` are least significant first.
// REQUIRES: `src` holds sizeof(T) readable bytes.
template <typename T>
T DecodeLittleEndian(const void* src) {
  static_assert(coding_internal::kCodable<T>);
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, src, sizeof(T));
  uint64_t bits = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    bits |= uint64_t{bytes[i]} << (8 * i);
  }
  return std::bit_cast<T>(static_cast<coding_internal::Bits<T>>(bits));
}

// Appends `value` to `out` as sizeof(T) bytes, least significant first.
template <typename T>
void PutLittleEndian(std::string& out, T value) {
  char bytes[sizeof(T)];
  EncodeLittleEndian(value, bytes);
  out.append(bytes, sizeof(T));
}

// See PutLittleEndian(std::string&, T).
template <typename T>
void PutLittleEndian(std::vector<std::byte>& out, T value) {
  std::byte bytes[sizeof(T)];
  EncodeLittleEndian(value, bytes);
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

// What a read that would pass the end of the bytes lacked: what the caller's
// wording function turns into its Status.
struct Shortfall {
  // The caller's name for what was being read (valid for the call only).
  absl::string_view field;
  // Where the read would have started, counted from the start of the bytes.
  size_t offset = 0;
  // The bytes the read needed, and where the bytes end.
  size_t needed = 0;
  size_t size = 0;
  // True for a fixed-width value (Read), false for a run of bytes
  // (ReadBytes, Skip).
  bool value = true;

  // Returns the bytes that were left at `offset`.
  size_t left() const { return size - offset; }
};

// Makes the Status of a failed read; called on the reading thread.
using ShortfallError = absl::Status (*)(const Shortfall&);

// Reads little-endian values in order from bounded bytes, never past their
// end. Thread-compatible. The bytes are borrowed: they must outlive the
// reader (and the string_views ReadBytes returns).
class LittleEndianReader {
 public:
  // Reads `bytes` from `offset` on (offsets in shortfalls and offset() count
  // from the start of `bytes`); `error` words a failed read.
  // REQUIRES: offset <= bytes.size(); `error` is not null.
  LittleEndianReader(absl::string_view bytes, ShortfallError error,
                     size_t offset = 0)
      : bytes_(bytes), error_(error), offset_(offset) {}
  LittleEndianReader(absl::Span<const std::byte> bytes, ShortfallError error,
                     size_t offset = 0)
      : LittleEndianReader(
            absl::string_view(reinterpret_cast<const char*>(bytes.data()),
                              bytes.size()),
            error, offset) {}

  // Returns where the next read starts.
  size_t offset() const { return offset_; }
  // Returns the bytes left to read.
  size_t left() const { return bytes_.size() - offset_; }

  // Reads a T into `value`; else returns error(shortfall) and leaves `value`
  // and offset() as they were.
  template <typename T>
  [[nodiscard]] absl::Status Read(absl::string_view field, T& value) {
    if (left() < sizeof(T)) return Short(field, sizeof(T), /*value=*/true);
    value = DecodeLittleEndian<T>(bytes_.data() + offset_);
    offset_ += sizeof(T);
    return absl::OkStatus();
  }

  // Points `out` at the next `n` bytes and moves past them; else returns
  // error(shortfall) and leaves `out` and offset() as they were.
  [[nodiscard]] absl::Status ReadBytes(absl::string_view field, size_t n,
                                       absl::string_view& out) {
    if (left() < n) return Short(field, n, /*value=*/false);
    out = bytes_.substr(offset_, n);
    offset_ += n;
    return absl::OkStatus();
  }

  // Moves past the next `n` bytes; else returns error(shortfall).
  [[nodiscard]] absl::Status Skip(absl::string_view field, size_t n) {
    if (left() < n) return Short(field, n, /*value=*/false);
    offset_ += n;
    return absl::OkStatus();
  }

 private:
  absl::Status Short(absl::string_view field, size_t needed, bool value) const {
    return error_(Shortfall{.field = field,
                            .offset = offset_,
                            .needed = needed,
                            .size = bytes_.size(),
                            .value = value});
  }

  absl::string_view bytes_;
  ShortfallError error_;
  size_t offset_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_BASE_CODING_H_
