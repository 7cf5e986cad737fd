// libFuzzer target for LoaderCheckpoint::FromBytes: arbitrary bytes must give
// a Status with a message, never a crash, a read outside the input
// (AddressSanitizer) or an allocation the input does not pay for (a
// checkpoint's shard count and state lengths are bounded by its size).
//
// Input: one mode byte, then the checkpoint's bytes. Mode bit 0 set: the
// last 4 bytes are first replaced by the right CRC-32C, so that mutations
// reach the field checks behind the checksum.
//
// A checkpoint that parses must be canonical: ToBytes() gives back exactly
// the input, and parses to the same value; otherwise the target aborts.
//
// Seeds: PINWHEEL_WRITE_SEEDS=DIR checkpoint_fuzzer writes valid
// checkpoints (map-style and iterable) into DIR and exits.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "loader/loader_checkpoint.h"
#include "pinning/base/crc32c.h"
#include "tests/fuzz/seeds.h"

namespace pinwheel {
namespace {

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "checkpoint_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

absl::StatusOr<std::vector<fuzz::Seed>> MakeSeeds() {
  std::vector<std::pair<const char*, LoaderCheckpoint>> seeds;
  LoaderCheckpoint map;
  map.dataset_size = 1000;
  map.shuffle = true;
  map.seed = 42;
  map.batch_size = 32;
  map.drop_last = true;
  map.world_size = 4;
  map.rank = 1;
  map.epoch = 3;
  map.position = 640;
  seeds.emplace_back("map_style", map);
  LoaderCheckpoint start;
  seeds.emplace_back("map_style_start", start);
  LoaderCheckpoint iterable;
  iterable.kind = LoaderCheckpoint::Kind::kIterable;
  iterable.dataset_size = -1;
  iterable.batch_size = 16;
  iterable.world_size = 2;
  iterable.rank = 1;
  iterable.epoch = 1;
  iterable.position = 7;
  iterable.num_shards = 6;
  iterable.shard_states = {std::string("12345"), std::nullopt, std::string()};
  seeds.emplace_back("iterable", iterable);
  std::vector<fuzz::Seed> files;
  for (const auto& [name, checkpoint] : seeds) {
    files.push_back({name, std::string(1, '\1') + checkpoint.ToBytes()});
  }
  return files;
}

}  // namespace
}  // namespace pinwheel

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  pinwheel::fuzz::WriteSeedsIfAsked("checkpoint_fuzzer", pinwheel::MakeSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 1) != 0 && bytes.size() >= 4) {
    const uint32_t crc =
        pinwheel::Crc32c(absl::string_view(bytes).substr(0, bytes.size() - 4));
    for (int i = 0; i < 4; ++i) {
      bytes[bytes.size() - 4 + i] = static_cast<char>(crc >> (8 * i));
    }
  }
  absl::StatusOr<pinwheel::LoaderCheckpoint> parsed =
      pinwheel::LoaderCheckpoint::FromBytes(bytes);
  if (!parsed.ok()) {
    pinwheel::Check(!parsed.status().message().empty(),
                    "an error has a message");
    return 0;
  }
  const std::string again = parsed->ToBytes();
  // A version 1 iterable checkpoint is written back as version 2 (with its
  // next_shard, 0): the value must round-trip, the bytes cannot.
  const bool upgraded =
      parsed->kind == pinwheel::LoaderCheckpoint::Kind::kIterable &&
      bytes[8] == 1;
  pinwheel::Check(upgraded || again == bytes,
                  "a parsed checkpoint serializes back");
  absl::StatusOr<pinwheel::LoaderCheckpoint> reparsed =
      pinwheel::LoaderCheckpoint::FromBytes(again);
  pinwheel::Check(reparsed.ok() && *reparsed == *parsed,
                  "the serialized checkpoint parses to the same value");
  return 0;
}
