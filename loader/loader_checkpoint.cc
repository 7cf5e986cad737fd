// LoaderCheckpoint: see loader_checkpoint.h (Note [exact resume], format).
#include "loader/loader_checkpoint.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "pinning/base/coding.h"
#include "pinning/base/crc32c.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

constexpr char kMagic[8] = {'P', 'W', 'L', 'D', 'C', 'K', 'P', 'T'};
constexpr size_t kHeaderBytes = 16;
constexpr size_t kChecksumBytes = 4;
constexpr size_t kFixedBodyBytes = 1 + 1 + 2 + 4 + 4 + 8 * 5;
constexpr uint8_t kShuffle = 1;
constexpr uint8_t kDropLast = 2;
constexpr uint8_t kDropUnevenTail = 4;
constexpr uint8_t kCustomOrder = 8;

// Words a read past the end of the checkpoint's body.
absl::Status Truncated(const Shortfall& s) {
  if (s.value) {
    return absl::DataLossError(
        absl::StrCat("LoaderCheckpoint: truncated in field '", s.field,
                     "' at byte ", s.offset));
  }
  return absl::DataLossError(
      absl::StrCat("LoaderCheckpoint: truncated in field '", s.field,
                   "': ", s.needed, " bytes announced, ", s.left(), " left"));
}

absl::Status BadField(absl::string_view field, absl::string_view value,
                      absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(
      "LoaderCheckpoint: field '", field, "' = ", value, ": ", rule));
}

absl::Status Mismatch(absl::string_view field, absl::string_view saved,
                      absl::string_view now) {
  return absl::InvalidArgumentError(
      absl::StrCat("resume: checkpoint field '", field, "' = ", saved,
                   " but the loader has ", now,
                   "; a checkpoint resumes only the same data order"));
}

}  // namespace

std::string LoaderCheckpoint::ToBytes() const {
  std::string body;
  PutLittleEndian<uint8_t>(body, static_cast<uint8_t>(kind));
  PutLittleEndian<uint8_t>(
      body, static_cast<uint8_t>((shuffle ? kShuffle : 0) |
                                 (drop_last ? kDropLast : 0) |
                                 (drop_uneven_tail ? kDropUnevenTail : 0) |
                                 (custom_order ? kCustomOrder : 0)));
  PutLittleEndian<uint16_t>(body, 0);
  PutLittleEndian<uint32_t>(body, static_cast<uint32_t>(world_size));
  PutLittleEndian<uint32_t>(body, static_cast<uint32_t>(rank));
  PutLittleEndian<int64_t>(body, dataset_size);
  PutLittleEndian<uint64_t>(body, seed);
  PutLittleEndian<int64_t>(body, batch_size);
  PutLittleEndian<int64_t>(body, epoch);
  PutLittleEndian<int64_t>(body, position);
  if (kind == Kind::kIterable) {
    PutLittleEndian<uint32_t>(body, static_cast<uint32_t>(num_shards));
    PutLittleEndian<uint32_t>(body, static_cast<uint32_t>(shard_states.size()));
    for (const std::optional<std::string>& state : shard_states) {
      PutLittleEndian<uint8_t>(body, state.has_value() ? 1 : 0);
      PutLittleEndian<uint32_t>(
          body, state ? static_cast<uint32_t>(state->size()) : 0);
      if (state) body += *state;
    }
    PutLittleEndian<uint32_t>(body, static_cast<uint32_t>(next_shard));
  }
  std::string all(kMagic, sizeof(kMagic));
  // Map-style bodies are version 1's: a pinwheel that reads only version 1
  // still reads them.
  PutLittleEndian<uint32_t>(all, kind == Kind::kIterable ? kVersion : 1);
  PutLittleEndian<uint32_t>(all, static_cast<uint32_t>(body.size()));
  all += body;
  PutLittleEndian<uint32_t>(all, Crc32c(all));
  return all;
}

absl::StatusOr<LoaderCheckpoint> LoaderCheckpoint::FromBytes(
    absl::string_view bytes) {
  if (bytes.size() < kHeaderBytes + kChecksumBytes) {
    return absl::DataLossError(absl::StrCat(
        "LoaderCheckpoint: truncated: ", bytes.size(), " bytes, at least ",
        kHeaderBytes + kChecksumBytes, " needed (header and checksum)"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(
        "LoaderCheckpoint: field 'magic' is not \"PWLDCKPT\": not a pinwheel "
        "loader checkpoint");
  }
  const char* const header = bytes.data() + sizeof(kMagic);
  const uint32_t version = DecodeLittleEndian<uint32_t>(header);
  const uint64_t body_bytes = DecodeLittleEndian<uint32_t>(header + 4);
  if (version == 0 || version > kVersion) {
    return BadField(
        "version", absl::StrCat(version),
        absl::StrCat(version > kVersion ? "newer than " : "not ",
                     "the version this pinwheel reads (", kVersion, ")"));
  }
  const uint64_t total = kHeaderBytes + body_bytes + kChecksumBytes;
  if (bytes.size() != total) {
    return absl::DataLossError(absl::StrCat(
        "LoaderCheckpoint: ", bytes.size() < total ? "truncated" : "too long",
        ": field 'body bytes' = ", body_bytes, " means ", total,
        " bytes in all, got ", bytes.size()));
  }
  const size_t checked = kHeaderBytes + static_cast<size_t>(body_bytes);
  const uint32_t stored = DecodeLittleEndian<uint32_t>(bytes.data() + checked);
  const uint32_t computed = Crc32c(bytes.substr(0, checked));
  if (stored != computed) {
    return absl::DataLossError(
        absl::StrCat("LoaderCheckpoint: field 'checksum' = ", stored,
                     " but the bytes' CRC-32C is ", computed,
                     ": the checkpoint is corrupted"));
  }

  // Offsets count from the start of the checkpoint (Truncated names them).
  LittleEndianReader body(bytes.substr(0, checked), Truncated, kHeaderBytes);
  if (body.left() < kFixedBodyBytes) {
    return absl::DataLossError(
        absl::StrCat("LoaderCheckpoint: field 'body bytes' = ", body_bytes,
                     ", at least ", kFixedBodyBytes, " needed"));
  }
  LoaderCheckpoint c;
  uint8_t kind = 0;
  uint8_t flags = 0;
  uint16_t reserved = 0;
  uint32_t world_size = 0;
  uint32_t rank = 0;
  PINWHEEL_RETURN_IF_ERROR(body.Read("kind", kind));
  PINWHEEL_RETURN_IF_ERROR(body.Read("flags", flags));
  PINWHEEL_RETURN_IF_ERROR(body.Read("reserved", reserved));
  PINWHEEL_RETURN_IF_ERROR(body.Read("world_size", world_size));
  PINWHEEL_RETURN_IF_ERROR(body.Read("rank", rank));
  PINWHEEL_RETURN_IF_ERROR(body.Read("dataset_size", c.dataset_size));
  PINWHEEL_RETURN_IF_ERROR(body.Read("seed", c.seed));
  PINWHEEL_RETURN_IF_ERROR(body.Read("batch_size", c.batch_size));
  PINWHEEL_RETURN_IF_ERROR(body.Read("epoch", c.epoch));
  PINWHEEL_RETURN_IF_ERROR(body.Read("position", c.position));
  if (kind > 1) {
    return BadField("kind", absl::StrCat(kind),
                    "must be 0 (map-style) or 1 (iterable)");
  }
  c.kind = static_cast<Kind>(kind);
  if ((flags &
       ~uint64_t{kShuffle | kDropLast | kDropUnevenTail | kCustomOrder}) != 0) {
    return BadField("flags", absl::StrCat(flags), "only bits 0..3 are defined");
  }
  c.custom_order = (flags & kCustomOrder) != 0;
  if (c.custom_order && ((flags & kShuffle) != 0 || kind != 0)) {
    return BadField("flags", absl::StrCat(flags),
                    "a custom order is map-style and never shuffled");
  }
  c.shuffle = (flags & kShuffle) != 0;
  c.drop_last = (flags & kDropLast) != 0;
  c.drop_uneven_tail = (flags & kDropUnevenTail) != 0;
  if (reserved != 0) {
    return BadField("reserved", absl::StrCat(reserved), "must be 0");
  }
  if (world_size < 1 || world_size > 0x7fffffff) {
    return BadField("world_size", absl::StrCat(world_size),
                    "must be in 1..2^31-1");
  }
  if (rank >= world_size) {
    return BadField("rank", absl::StrCat(rank),
                    absl::StrCat("must be below world_size = ", world_size));
  }
  c.world_size = static_cast<int>(world_size);
  c.rank = static_cast<int>(rank);
  if (c.batch_size < 1) {
    return BadField("batch_size", absl::StrCat(c.batch_size), "must be >= 1");
  }
  if (c.epoch < 0) {
    return BadField("epoch", absl::StrCat(c.epoch), "must be >= 0");
  }
  if (c.kind == Kind::kMapStyle) {
    if (version != 1) {
      return BadField("version", absl::StrCat(version),
                      "a map-style checkpoint is version 1 (only iterable "
                      "ones changed in version 2)");
    }
    if (c.dataset_size < 0) {
      return BadField("dataset_size", absl::StrCat(c.dataset_size),
                      "must be >= 0 for a map-style dataset");
    }
    if (c.position < 0 || c.position > c.dataset_size) {
      return BadField(
          "position", absl::StrCat(c.position),
          absl::StrCat("must be in 0..dataset_size = 0..", c.dataset_size));
    }
    if (body.left() != 0) {
      return BadField("body bytes", absl::StrCat(body_bytes),
                      absl::StrCat(body.left(), " bytes after the last field"));
    }
    return c;
  }
  if (c.dataset_size != -1) {
    return BadField("dataset_size", absl::StrCat(c.dataset_size),
                    "must be -1 for an iterable dataset");
  }
  if (c.shuffle) {
    return BadField("flags", absl::StrCat(flags),
                    "shuffle is not an option of an iterable dataset");
  }
  if (c.position < 0) {
    return BadField("position", absl::StrCat(c.position), "must be >= 0");
  }
  uint32_t num_shards = 0;
  uint32_t shards = 0;
  PINWHEEL_RETURN_IF_ERROR(body.Read("num_shards", num_shards));
  PINWHEEL_RETURN_IF_ERROR(body.Read("shards", shards));
  if (num_shards < 1 || num_shards > LoaderCheckpoint::kMaxNumShards) {
    return BadField("num_shards", absl::StrCat(num_shards),
                    "must be in 1..2^31-1");
  }
  // Each shard takes at least 5 bytes: bound the count before reserving.
  if (shards < 1 || shards > num_shards || shards > body.left() / 5) {
    return BadField(
        "shards", absl::StrCat(shards),
        absl::StrCat("must be in 1..num_shards = 1..", num_shards,
                     " and fit in the ", body.left(), " bytes left"));
  }
  c.num_shards = static_cast<int>(num_shards);
  c.shard_states.reserve(shards);
  for (uint32_t s = 0; s < shards; ++s) {
    const std::string field = absl::StrCat("shard_states[", s, "]");
    uint8_t has = 0;
    uint32_t length = 0;
    PINWHEEL_RETURN_IF_ERROR(body.Read(field, has));
    PINWHEEL_RETURN_IF_ERROR(body.Read(field, length));
    if (has > 1 || (has == 0 && length != 0)) {
      return BadField(field, absl::StrCat("(", has, ", ", length, ")"),
                      "has_state must be 0 or 1, and length 0 without state");
    }
    absl::string_view state;
    PINWHEEL_RETURN_IF_ERROR(body.ReadBytes(field, length, state));
    if (has == 1) {
      c.shard_states.emplace_back(std::string(state));
    } else {
      c.shard_states.emplace_back(std::nullopt);
    }
  }
  if (version >= 2) {
    uint32_t next_shard = 0;
    PINWHEEL_RETURN_IF_ERROR(body.Read("next_shard", next_shard));
    if (next_shard >= shards) {
      return BadField("next_shard", absl::StrCat(next_shard),
                      absl::StrCat("must be below shards = ", shards));
    }
    c.next_shard = static_cast<int>(next_shard);
  }
  if (body.left() != 0) {
    return BadField("body bytes", absl::StrCat(body_bytes),
                    absl::StrCat(body.left(), " bytes after the last field"));
  }
  return c;
}

absl::Status CheckResumable(const LoaderCheckpoint& checkpoint,
                            const LoaderOptions& options,
                            int64_t dataset_size) {
  const bool iterable = dataset_size < 0;
  if (checkpoint.epoch < 0) {
    return Mismatch("epoch", absl::StrCat(checkpoint.epoch), "epochs >= 0");
  }
  if (iterable != (checkpoint.kind == LoaderCheckpoint::Kind::kIterable)) {
    return Mismatch("kind",
                    checkpoint.kind == LoaderCheckpoint::Kind::kIterable
                        ? "iterable"
                        : "map-style",
                    iterable ? "an iterable dataset" : "a map-style dataset");
  }
  if (!iterable) {
    if (checkpoint.dataset_size != dataset_size) {
      return Mismatch("dataset_size", absl::StrCat(checkpoint.dataset_size),
                      absl::StrCat(dataset_size, " samples"));
    }
    if (checkpoint.shuffle != options.shuffle) {
      return Mismatch("shuffle", checkpoint.shuffle ? "true" : "false",
                      options.shuffle ? "shuffle on" : "shuffle off");
    }
    const bool custom = options.sampler != nullptr;
    if (checkpoint.custom_order != custom) {
      return Mismatch("sampler",
                      checkpoint.custom_order ? "custom" : "built-in",
                      custom ? "a custom sampler" : "the built-in order");
    }
    if ((checkpoint.shuffle || checkpoint.custom_order) &&
        checkpoint.seed != options.seed) {
      return Mismatch("seed", absl::StrCat(checkpoint.seed),
                      absl::StrCat("seed ", options.seed));
    }
    return absl::OkStatus();
  }
  const int per_rank = std::max(1, options.num_workers);
  const int64_t num_shards = int64_t{per_rank} * options.world_size;
  if (checkpoint.world_size != options.world_size) {
    return Mismatch("world_size", absl::StrCat(checkpoint.world_size),
                    absl::StrCat("world_size ", options.world_size,
                                 " (an iterable dataset resumes only on the "
                                 "same shards)"));
  }
  if (checkpoint.rank != options.rank) {
    return Mismatch(
        "rank", absl::StrCat(checkpoint.rank),
        absl::StrCat("rank ", options.rank,
                     " (resume each rank from its own checkpoint)"));
  }
  if (checkpoint.num_shards != num_shards ||
      static_cast<int>(checkpoint.shard_states.size()) != per_rank) {
    return Mismatch(
        "num_shards", absl::StrCat(checkpoint.num_shards),
        absl::StrCat(num_shards, " shards (world_size ", options.world_size,
                     " × max(1, num_workers = ", options.num_workers,
                     "); an iterable dataset resumes only on the same "
                     "shards"));
  }
  if (checkpoint.next_shard < 0 || checkpoint.next_shard >= per_rank) {
    return Mismatch("next_shard", absl::StrCat(checkpoint.next_shard),
                    absl::StrCat("one of this rank's ", per_rank, " shards"));
  }
  return absl::OkStatus();
}

}  // namespace pinwheel
