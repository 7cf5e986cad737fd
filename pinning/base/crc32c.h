// CRC-32C (Castagnoli, the iSCSI polynomial 0x1EDC6F41, reflected), the
// checksum of pinwheel's checkpoint files (LoaderCheckpoint and the sample
// trainer's).
//
// Example:
//   const uint32_t crc = Crc32c(bytes);
//   // in pieces, the same value:
//   const uint32_t same = Crc32c(second_half, Crc32c(first_half));
//
// A table-driven byte-at-a-time implementation: checkpoints are a few
// kilobytes to a few megabytes, written once per checkpoint interval.
#ifndef PINWHEEL_PINNING_BASE_CRC32C_H_
#define PINWHEEL_PINNING_BASE_CRC32C_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace pinwheel {

// Returns the CRC-32C (Castagnoli) of `bytes`, continuing from `crc` (the
// CRC-32C of the bytes before them; 0 to start). Thread-safe.
uint32_t Crc32c(absl::string_view bytes, uint32_t crc = 0);

}  // namespace pinwheel

#endif  // PINWHEEL_PINNING_BASE_CRC32C_H_
