#include "loader/pipeline/memory_admission.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "pinning/host_memory_limits.h"

namespace pinwheel::internal {
namespace {

constexpr uint64_t kPageBytes = 4096;  // as PinnedRing and HostAllocation round

std::string Bytes(uint64_t bytes) {
  return absl::StrCat(bytes, " bytes (", bytes >> 20, " MiB)");
}

uint64_t RoundUpToPage(uint64_t bytes) {
  return bytes > UINT64_MAX - (kPageBytes - 1)
             ? UINT64_MAX
             : (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
}

// "what N × S bytes (detail) = T bytes", with the rounding said when it
// changed S; false when T overflows.
bool DescribePart(absl::string_view what, int count, uint64_t bytes_each,
                  absl::string_view detail, uint64_t& total,
                  std::string& text) {
  const uint64_t rounded = RoundUpToPage(bytes_each);
  const bool overflow = __builtin_mul_overflow(
      static_cast<uint64_t>(count < 0 ? 0 : count), rounded, &total);
  text = absl::StrCat(what, count, " × ", rounded, " bytes");
  if (rounded != bytes_each) {
    absl::StrAppend(&text, " (", bytes_each, " rounded up to a multiple of ",
                    kPageBytes, ")");
  }
  if (!detail.empty()) absl::StrAppend(&text, " (", detail, ")");
  if (overflow) {
    absl::StrAppend(&text, " = more than 2^64 bytes");
  } else {
    absl::StrAppend(&text, " = ", total, " bytes");
  }
  return !overflow;
}

}  // namespace

absl::Status AdmitHostMemory(const HostMemoryPlan& plan,
                             const MemoryLimits& limits) {
  uint64_t ring = 0;
  uint64_t pool = 0;
  std::string ring_text;
  std::string pool_text;
  const std::string slot_detail =
      plan.batch_size > 0 && plan.sample_bytes > 0
          ? absl::StrCat("batch_size ", plan.batch_size, " × ",
                         plan.sample_bytes, " bytes per sample")
          : std::string();
  bool fits_64_bits =
      DescribePart("pinned ring of prefetch = ", plan.ring_slots,
                   plan.slot_bytes, slot_detail, ring, ring_text);
  std::string parts = ring_text;
  if (plan.pool_buffers > 0) {
    fits_64_bits &= DescribePart(
        "+ device buffer pool in host memory (host backend) of "
        "device_buffers = ",
        plan.pool_buffers, plan.pool_buffer_bytes, "", pool, pool_text);
    absl::StrAppend(&parts, " ", pool_text);
  }
  uint64_t registered = 0;
  if (plan.registered_bytes > 0) {
    std::string registered_text;
    fits_64_bits &=
        DescribePart("+ dataset memory registered for the gather path = ", 1,
                     plan.registered_bytes, "", registered, registered_text);
    absl::StrAppend(&parts, " ", registered_text);
  }
  uint64_t sum = 0;
  if (!fits_64_bits || __builtin_add_overflow(ring, pool, &sum) ||
      __builtin_add_overflow(sum, registered, &sum)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("host memory: ", parts, ": the sum overflows 64 bits"));
  }
  // The smallest limit is the one that counts.
  std::optional<uint64_t> limit;
  std::string limit_text;
  if (limits.physical_bytes) {
    limit = limits.physical_bytes;
    limit_text = absl::StrCat("the machine's physical memory ",
                              Bytes(*limits.physical_bytes));
  }
  if (limits.cgroup_bytes && (!limit || *limits.cgroup_bytes < *limit)) {
    limit = limits.cgroup_bytes;
    limit_text =
        absl::StrCat("the cgroup memory limit ", Bytes(*limits.cgroup_bytes),
                     " of ", limits.cgroup_file);
  }
  if (!limit || sum <= *limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "host memory: ", parts, " = ", Bytes(sum), " in all, more than ",
      limit_text,
      plan.registered_bytes > 0
          ? "; lower prefetch, batch_size or device_buffers, or set "
            "gather = GatherMode::kOff"
          : "; lower prefetch, batch_size or device_buffers"));
}

uint64_t HostMemoryHeadroom(const HostMemoryPlan& plan,
                            const MemoryLimits& limits) {
  std::optional<uint64_t> limit = limits.physical_bytes;
  if (limits.cgroup_bytes && (!limit || *limits.cgroup_bytes < *limit)) {
    limit = limits.cgroup_bytes;
  }
  if (!limit) return UINT64_MAX;
  uint64_t ring = 0;
  uint64_t pool = 0;
  uint64_t sum = 0;
  std::string unused;
  if (!DescribePart("", plan.ring_slots, plan.slot_bytes, "", ring, unused) ||
      !DescribePart("", plan.pool_buffers, plan.pool_buffer_bytes, "", pool,
                    unused) ||
      __builtin_add_overflow(ring, pool, &sum) || sum >= *limit) {
    return 0;
  }
  return *limit - sum;
}

}  // namespace pinwheel::internal
