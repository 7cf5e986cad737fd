// libFuzzer target for CheckJpegFraming (the GPU decoder's host-side guard):
// arbitrary bytes must give a Status, never a crash or a read outside the
// span (AddressSanitizer checks the latter: libFuzzer hands over an
// exactly-sized heap copy of the input). An accepted input must start with
// FF D8 and hold an FF D9 pair; otherwise the target aborts.
//
// Seeds: PINWHEEL_WRITE_SEEDS=DIR jpeg_framing_fuzzer writes a few minimal
// framed JPEG skeletons into DIR and exits.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/fuzz/seeds.h"
#include "transfer/jpeg/jpeg_framing.h"

namespace pinwheel {
namespace {

absl::StatusOr<std::vector<fuzz::Seed>> MakeSeeds() {
  const std::vector<std::vector<uint8_t>> seeds = {
      // SOI, DQT (3 bytes), SOF0 (short), SOS, data, EOI.
      {0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x03, 0x00, 0xFF, 0xC0, 0x00, 0x04, 0x08,
       0x00, 0xFF, 0xDA, 0x00, 0x02, 0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD9},
      // An APP1 holding a thumbnail's FF D9 before the scan.
      {0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x06, 0xFF, 0xD8, 0xFF, 0xD9,
       0xFF, 0xDA, 0x00, 0x02, 0x55, 0xFF, 0xD0, 0x66, 0xFF, 0xD9},
  };
  std::vector<fuzz::Seed> files;
  for (size_t i = 0; i < seeds.size(); ++i) {
    files.push_back({"seed" + std::to_string(i),
                     std::string(seeds[i].begin(), seeds[i].end())});
  }
  return files;
}

}  // namespace
}  // namespace pinwheel

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  pinwheel::fuzz::WriteSeedsIfAsked("jpeg_framing_fuzzer", pinwheel::MakeSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Span<const uint8_t> bytes(data, size);
  if (!pinwheel::internal::CheckJpegFraming(bytes).ok()) return 0;
  bool has_end = false;
  for (size_t i = 0; i + 1 < size; ++i) {
    has_end |= data[i] == 0xFF && data[i + 1] == 0xD9;
  }
  if (size < 4 || data[0] != 0xFF || data[1] != 0xD8 || !has_end) {
    std::fprintf(stderr, "jpeg_framing_fuzzer: accepted an unframed input\n");
    std::abort();
  }
  return 0;
}
