// The fuzzers' seed corpora: with PINWHEEL_WRITE_SEEDS=DIR in the
// environment, a fuzzer's LLVMFuzzerInitialize() writes its valid inputs
// into DIR, one file each, and exits (tests/fuzz/run.sh seeds each corpus
// so). One helper for all of them.
//
// Example:
//   extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
//     pinwheel::fuzz::WriteSeedsIfAsked("tar_reader_fuzzer",
//                                       pinwheel::MakeSeeds);
//     return 0;
//   }
#ifndef PINWHEEL_TESTS_FUZZ_SEEDS_H_
#define PINWHEEL_TESTS_FUZZ_SEEDS_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pinwheel::fuzz {

// One seed: written to DIR/<name>.
struct Seed {
  std::string name;
  std::string bytes;
};

// Writes each of `seeds` to `dir`/<its name>; returns 0, or 1 after naming
// (perror) the file that could not be written.
inline int WriteSeedFiles(const char* fuzzer, const std::string& dir,
                          const std::vector<Seed>& seeds) {
  for (const Seed& seed : seeds) {
    const std::string path = dir + "/" + seed.name;
    std::FILE* out = std::fopen(path.c_str(), "wb");
    if (out == nullptr ||
        std::fwrite(seed.bytes.data(), 1, seed.bytes.size(), out) !=
            seed.bytes.size() ||
        std::fclose(out) != 0) {
      std::perror(path.c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "%s: wrote %zu seeds to %s\n", fuzzer, seeds.size(),
               dir.c_str());
  return 0;
}

// When PINWHEEL_WRITE_SEEDS names a directory: writes the seeds that
// `make_seeds()` returns (an absl::StatusOr<std::vector<Seed>>) into it and
// exits, with 0, or 1 after printing why a seed could not be made or
// written. Otherwise returns and does nothing.
template <typename MakeSeeds>
void WriteSeedsIfAsked(const char* fuzzer, MakeSeeds make_seeds) {
  const char* dir = std::getenv("PINWHEEL_WRITE_SEEDS");
  if (dir == nullptr) return;
  const absl::StatusOr<std::vector<Seed>> seeds = make_seeds();
  if (!seeds.ok()) {
    std::fprintf(stderr, "%s: seeds: %s\n", fuzzer,
                 seeds.status().ToString().c_str());
    std::exit(1);
  }
  std::exit(WriteSeedFiles(fuzzer, dir, *seeds));
}

}  // namespace pinwheel::fuzz

#endif  // PINWHEEL_TESTS_FUZZ_SEEDS_H_
