// The record file format's constants (see record_file.h for the layout),
// shared by the reader and the writer.
#ifndef PINWHEEL_LOADER_INTERNAL_RECORD_FORMAT_H_
#define PINWHEEL_LOADER_INTERNAL_RECORD_FORMAT_H_

#include <cstddef>
#include <cstdint>

#include "transfer/sample_layout.h"

namespace pinwheel::internal::record_format {

// Offsets of the fixed part of the header (see record_file.h).
constexpr size_t kMagicOffset = 0;
constexpr size_t kVersionOffset = 8;
constexpr size_t kHeaderBytesOffset = 12;
constexpr size_t kCountOffset = 16;
constexpr size_t kRecordBytesOffset = 24;
constexpr size_t kNumFieldsOffset = 32;
constexpr size_t kFixedHeaderBytes = 36;
constexpr size_t kHeaderAlignment = 64;

// Limits that no sane layout reaches; they keep a corrupt header from
// describing absurd work (and keep every count small enough not to overflow).
constexpr uint32_t kMaxFields = 4096;
constexpr uint16_t kMaxNameBytes = 256;
constexpr uint8_t kMaxRank = 16;
constexpr uint32_t kMaxHeaderBytes = 16u << 20;          // 16 MiB
constexpr uint64_t kMaxSampleBytes = uint64_t{1} << 30;  // SampleLayout's
constexpr uint8_t kNumDTypes = static_cast<uint8_t>(DType::kFloat64) + 1;

}  // namespace pinwheel::internal::record_format

#endif  // PINWHEEL_LOADER_INTERNAL_RECORD_FORMAT_H_
