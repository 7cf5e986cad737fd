// libFuzzer target for ParseRecordFileHeader: arbitrary bytes must give a
// Status, never a crash or a read outside the span (AddressSanitizer checks
// the latter: libFuzzer hands over an exactly-sized heap copy of the input).
//
// Input: one mode byte, then the file's first bytes. Mode < 128: the bytes
// are the whole file. Mode >= 128: the file is (mode - 128) × 61 bytes
// longer than what is given (Open() passes the whole map, but the parser
// must not assume so).
//
// A header that parses must be consistent, and must survive a
// SerializeRecordFileHeader round trip; otherwise the target aborts.
//
// Seeds: PINWHEEL_WRITE_SEEDS=DIR record_header_fuzzer writes valid files
// (SerializeRecordFileHeader + zeroed records) into DIR and exits.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "loader/record_file.h"
#include "tests/fuzz/seeds.h"
#include "transfer/sample_layout.h"

namespace pinwheel {
namespace {

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "record_header_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

void CheckParsedHeader(const RecordFileHeader& header,
                       absl::Span<const std::byte> bytes, uint64_t file_size) {
  Check(header.header_bytes % 64 == 0, "header_bytes is a multiple of 64");
  Check(header.header_bytes <= bytes.size(), "the header lies in the bytes");
  Check(header.count > 0, "count > 0");
  Check(header.record_bytes == header.layout.sample_bytes(),
        "record_bytes == sample_bytes");
  Check(header.header_bytes + header.count * header.record_bytes == file_size,
        "header + count × record == file size");

  const std::vector<std::byte> again =
      SerializeRecordFileHeader(header.layout, header.count);
  Check(again.size() <= header.header_bytes,
        "the canonical header is no longer than the parsed one");
  if (again.size() == header.header_bytes) {
    Check(std::memcmp(again.data(), bytes.data(), again.size()) == 0,
          "a canonical-size header serializes back to the same bytes");
  }
  absl::StatusOr<RecordFileHeader> reparsed = ParseRecordFileHeader(
      again, again.size() + header.count * header.record_bytes);
  Check(reparsed.ok(), "the serialized header parses");
  Check(reparsed->layout == header.layout, "the layout round-trips");
  Check(reparsed->count == header.count, "the count round-trips");
}

struct Seed {
  const char* name;
  std::vector<FieldSpec> fields;
  uint64_t count;
};

absl::StatusOr<std::vector<fuzz::Seed>> MakeSeeds() {
  std::vector<Seed> seeds = {
      {"image_label",
       {{.name = "image", .dtype = DType::kUInt8, .shape = {3, 4, 5}},
        {.name = "label", .dtype = DType::kInt64, .shape = {}}},
       2},
      {"scalar", {{.name = "x", .dtype = DType::kFloat32, .shape = {}}}, 3},
      {"rank4_bf16",
       {{.name = "t", .dtype = DType::kBFloat16, .shape = {1, 2, 3, 1}}},
       1},
  };
  std::vector<FieldSpec> every_dtype;
  for (int d = 0; d <= static_cast<int>(DType::kFloat64); ++d) {
    every_dtype.push_back({.name = "f" + std::to_string(d),
                           .dtype = static_cast<DType>(d),
                           .shape = {2}});
  }
  seeds.push_back({"every_dtype", every_dtype, 1});

  std::vector<fuzz::Seed> files;
  for (const Seed& seed : seeds) {
    absl::StatusOr<SampleLayout> layout = SampleLayout::Create(seed.fields);
    if (!layout.ok()) {
      return absl::Status(layout.status().code(),
                          std::string(seed.name) + ": " +
                              std::string(layout.status().message()));
    }
    std::vector<std::byte> file =
        SerializeRecordFileHeader(*layout, seed.count);
    file.insert(file.begin(), std::byte{0});  // mode: the whole file
    file.resize(file.size() + seed.count * layout->sample_bytes());
    files.push_back(
        {seed.name,
         std::string(reinterpret_cast<const char*>(file.data()), file.size())});
  }
  return files;
}

}  // namespace
}  // namespace pinwheel

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  pinwheel::fuzz::WriteSeedsIfAsked("record_header_fuzzer",
                                    pinwheel::MakeSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const absl::Span<const std::byte> bytes(
      reinterpret_cast<const std::byte*>(data + 1), size - 1);
  const uint64_t file_size =
      bytes.size() + (mode >= 128 ? uint64_t{mode - 128u} * 61 : 0);
  absl::StatusOr<pinwheel::RecordFileHeader> header =
      pinwheel::ParseRecordFileHeader(bytes, file_size);
  if (header.ok()) {
    pinwheel::CheckParsedHeader(*header, bytes, file_size);
  } else {
    pinwheel::Check(!header.status().message().empty(),
                    "an error has a message");
  }
  return 0;
}
