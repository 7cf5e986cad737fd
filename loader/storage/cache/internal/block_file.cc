#include "loader/storage/cache/internal/block_file.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "pinning/base/crc32c.h"

namespace pinwheel::internal {
namespace {

constexpr char kMagic[8] = {'P', 'W', 'C', 'B', 'L', 'O', 'C', 'K'};
constexpr uint32_t kVersion = 1;

// FNV-1a, 64 bits: stable across runs and builds (absl::Hash is not).
uint64_t StableHash(absl::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

template <typename T>
void Put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

template <typename T>
T Get(const std::string& in, size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  return value;
}

}  // namespace

std::string BlockFileName(absl::string_view url, int64_t block) {
  return absl::StrFormat("%016x-%d%s", StableHash(url), block,
                         kBlockFileSuffix);
}

std::string EncodeBlockFileHead(absl::string_view url, int64_t object_size,
                                int64_t block, absl::string_view payload) {
  std::string head(kMagic, sizeof(kMagic));
  Put<uint32_t>(head, kVersion);
  Put<uint32_t>(head, static_cast<uint32_t>(url.size()));
  Put<int64_t>(head, object_size);
  Put<int64_t>(head, block);
  Put<int64_t>(head, static_cast<int64_t>(payload.size()));
  Put<uint32_t>(head, Crc32c(payload));
  Put<uint32_t>(head, Crc32c(url, Crc32c(head)));
  head.append(url.data(), url.size());
  return head;
}

absl::StatusOr<BlockFileInfo> ReadBlockFile(const std::string& path,
                                            absl::string_view name) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::DataLossError(
        absl::StrCat("cache file ", path, ": cannot be opened"));
  }
  const std::string bytes((std::istreambuf_iterator<char>(file)),
                          std::istreambuf_iterator<char>());
  if (bytes.size() < static_cast<size_t>(kBlockFileHeaderBytes)) {
    return absl::DataLossError(absl::StrCat("cache file ", path, ": ",
                                            bytes.size(),
                                            " bytes, shorter than a header"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0 ||
      Get<uint32_t>(bytes, 8) != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache file ", path, ": not a version ", kVersion,
                     " block file (magic or version)"));
  }
  BlockFileInfo info;
  const uint32_t url_bytes = Get<uint32_t>(bytes, 12);
  info.object_size = Get<int64_t>(bytes, 16);
  info.block = Get<int64_t>(bytes, 24);
  info.payload_bytes = Get<int64_t>(bytes, 32);
  info.payload_offset = kBlockFileHeaderBytes + url_bytes;
  if (bytes.size() < static_cast<size_t>(info.payload_offset)) {
    return absl::DataLossError(
        absl::StrCat("cache file ", path, ": truncated inside its url"));
  }
  info.url =
      bytes.substr(static_cast<size_t>(kBlockFileHeaderBytes), url_bytes);
  const uint32_t head_crc =
      Crc32c(info.url, Crc32c(absl::string_view(bytes.data(), 44)));
  if (head_crc != Get<uint32_t>(bytes, 44)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache file ", path, ": header checksum mismatch"));
  }
  if (name != BlockFileName(info.url, info.block)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache file ", path, ": holds block ", info.block, " of ", info.url,
        ", whose name is ", BlockFileName(info.url, info.block)));
  }
  if (info.payload_bytes < 0 || info.object_size < 0 ||
      bytes.size() !=
          static_cast<size_t>(info.payload_offset + info.payload_bytes)) {
    return absl::DataLossError(absl::StrCat(
        "cache file ", path, ": ", bytes.size(), " bytes, expected ",
        info.payload_offset + info.payload_bytes));
  }
  const absl::string_view payload(bytes.data() + info.payload_offset,
                                  static_cast<size_t>(info.payload_bytes));
  if (Crc32c(payload) != Get<uint32_t>(bytes, 40)) {
    return absl::DataLossError(
        absl::StrCat("cache file ", path, ": payload checksum mismatch"));
  }
  return info;
}

}  // namespace pinwheel::internal
