// libFuzzer target for ReadTarMember: arbitrary bytes walked as a tar
// archive must give members inside the bytes or a Status, never a crash, a
// read outside the span (AddressSanitizer checks it: libFuzzer hands over an
// exactly-sized heap copy) or a loop (offsets must strictly increase).
//
// Seeds: PINWHEEL_WRITE_SEEDS=DIR tar_reader_fuzzer writes small valid
// archives (ustar members, a GNU long name, a pax path) into DIR and exits.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "loader/image/tar_reader.h"
#include "tests/fuzz/seeds.h"

namespace pinwheel {
namespace {

// Where the data's checksum goes, so that the reads are not optimised out.
volatile uint8_t g_sink = 0;

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "tar_reader_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

// A ustar header for `name` holding `size` bytes of type `type`.
void AppendMember(std::string& tar, const std::string& name,
                  const std::string& data, char type) {
  char header[512] = {};
  std::memcpy(header, name.data(), name.size() < 100 ? name.size() : 100);
  std::snprintf(header + 100, 8, "%07o", 0644);
  std::snprintf(header + 124, 12, "%011llo",
                static_cast<unsigned long long>(data.size()));
  header[156] = type;
  std::memcpy(header + 257, "ustar", 6);
  std::memset(header + 148, ' ', 8);
  unsigned sum = 0;
  for (char c : header) sum += static_cast<unsigned char>(c);
  std::snprintf(header + 148, 8, "%06o", sum);
  tar.append(header, 512);
  tar.append(data);
  tar.resize((tar.size() + 511) / 512 * 512, '\0');
}

absl::StatusOr<std::vector<fuzz::Seed>> MakeSeeds() {
  std::vector<fuzz::Seed> seeds;
  std::string plain;
  AppendMember(plain, "a/1.jpg", std::string(700, 'x'), '0');
  AppendMember(plain, "a/1.cls", "3\n", '0');
  AppendMember(plain, "a/", "", '5');
  plain.append(1024, '\0');
  seeds.push_back({"plain", plain});
  std::string extended;
  AppendMember(extended, "././@LongLink", std::string(150, 'n') + ".jpg", 'L');
  AppendMember(extended, "ignored", "data", '0');
  AppendMember(extended, "PaxHeader", "21 path=p/sample.cls\n", 'x');
  AppendMember(extended, "short", "1", '0');
  seeds.push_back({"extended", extended});
  return seeds;
}

}  // namespace
}  // namespace pinwheel

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  pinwheel::fuzz::WriteSeedsIfAsked("tar_reader_fuzzer", pinwheel::MakeSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Span<const std::byte> tar(
      reinterpret_cast<const std::byte*>(data), size);
  uint64_t offset = 0;
  for (;;) {
    absl::StatusOr<std::optional<pinwheel::TarMember>> member =
        pinwheel::ReadTarMember(tar, offset, "fuzz.tar");
    if (!member.ok()) {
      pinwheel::Check(!member.status().message().empty(),
                      "an error has a message");
      return 0;
    }
    if (!member->has_value()) return 0;
    const pinwheel::TarMember& m = **member;
    pinwheel::Check(m.header_offset == offset, "the member starts at offset");
    pinwheel::Check(m.data_offset >= offset + pinwheel::kTarBlockBytes,
                    "the data follows the header");
    pinwheel::Check(m.data_offset <= size && m.size <= size - m.data_offset,
                    "the data lies in the bytes");
    pinwheel::Check(m.next_offset > offset, "the walk moves forward");
    pinwheel::Check(m.next_offset <= size, "the next header is in the bytes");
    // Read the data, so that ASan sees any read outside the span.
    uint8_t sum = 0;
    for (uint64_t i = 0; i < m.size; i += 97) sum ^= data[m.data_offset + i];
    pinwheel::g_sink = sum;
    offset = m.next_offset;
  }
}
