// Where the gather path reads a dataset's regions (loader/gather_source.h):
// in place, or from a copy on pages of its own. PlanGather() registers the
// pages of what PlaceRegions() returns, never a page that may hold memory
// the dataset does not own.
//
// Note [small arrays are copied onto pages of their own]
// cudaHostRegister works on whole pages, so registering a heap array in
// place registers its neighbours on the same pages too: the user's buffers,
// a test's std::vector, the runtime's own. The CUDA driver then treats them
// as pinned, and refuses a copy whose host range is part registered and part
// not ("Memory regions spanning over allocations that are both registered
// and not registered with CUDA are not supported and will return
// CUDA_ERROR_INVALID_VALUE", cuMemcpy's documentation): a device-to-host
// cudaMemcpyAsync into a pageable buffer that straddles the edge of a
// registered page fails and writes nothing. Which buffers straddle depends
// on the heap's layout, so the failure comes and goes: it is the likely
// cause of GatherPath.MoreFieldsThanOneLaunchTakesAreAllGathered_CUDA
// failing in 2 of 4 runs on the H100 (20 arrays of 37 to 740 bytes, the
// test's host copies of the batches allocated beside them; a failed copy
// left a field empty, which compared as a mismatch). Recorded on the host
// backend over the whole gather_test binary (6 runs), 0 to 3 of the 400
// host copies straddled the edge of a registered range and 5 to 40 lay
// inside one, differing from run to run.
// So a region smaller than kCopiedRegionBytes is copied, once, into
// page-aligned memory rounded up to whole pages that the loader owns, and
// that copy is registered; several loaders over the same regions share the
// copy (and so its registration) while it holds the regions' bytes. A larger
// region is still registered in place (copying it would double its memory):
// glibc's malloc serves every allocation of 32 MiB or more with an mmap of its
// own (its mmap threshold starts at 128 KiB and grows to at most 32 MiB on
// 64-bit), so its pages hold nothing else; with another allocator, or an array
// inside a larger allocation, its first and last pages may still be shared. A
// source whose owner allocated whole pages (GatherSource::owns_pages: a
// file read into memory) is registered in place whatever its size.
//
// Note [a copy is shared while its bytes are the source's]
// The copy is taken when a loader is built (loader/gather_source.h). A
// loader built later over the same regions shares it only when the bytes
// it holds still equal the regions' (one memcmp over the small arrays, less
// than 32 MiB each, at Build()); when the arrays changed in between, the new
// loader gets a copy of its own and the earlier loader keeps reading its own
// copy, as taken when it was built. (Shared unchecked, the second loader
// served the first one's bytes: issue 35, item 4.)
//
// Example (PlanGather):
//   PINWHEEL_ASSIGN_OR_RETURN(GatherMemory memory, PlaceRegions(source));
//   ranges = RegisteredRanges(memory.regions);
#ifndef PINWHEEL_LOADER_GATHER_GATHER_MEMORY_H_
#define PINWHEEL_LOADER_GATHER_GATHER_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "loader/gather_source.h"

namespace pinwheel::internal {

// Regions smaller than this are copied onto pages of their own: see
// Note [small arrays are copied onto pages of their own].
inline constexpr uint64_t kCopiedRegionBytes = uint64_t{32} << 20;

// Where the gather reads a source's regions. A value; thread-compatible.
struct GatherMemory {
  // Per region of the source, in its order: the region itself, or its
  // copy (the same size and bytes).
  std::vector<absl::Span<const std::byte>> regions;
  // Keeps the copies alive; null when nothing was copied.
  std::shared_ptr<const void> copies;
};

// Returns where the gather reads `source`'s regions: regions smaller than
// kCopiedRegionBytes, unless source.owns_pages or the region is whole pages
// itself, copied into one page-aligned buffer of whole pages, shared with every
// caller that holds a copy of the same regions (the same addresses and sizes)
// while it holds their current bytes, else a new copy (Note [a copy is shared
// while its bytes are the source's]). ResourceExhausted, before anything is
// allocated, when a new copy would take more than `max_copy_bytes`, or when
// it cannot be allocated. Thread-safe.
[[nodiscard]] absl::StatusOr<GatherMemory> PlaceRegions(
    const GatherSource& source, uint64_t max_copy_bytes = UINT64_MAX);

// Returns the page ranges PlanGather() registers for `regions`: each
// non-empty region widened to whole 4096-byte pages, overlapping or
// touching ones merged (two small arrays on one page would otherwise be
// two registrations of the same page, which CUDA refuses), in address order.
std::vector<absl::Span<const std::byte>> RegisteredRanges(
    absl::Span<const absl::Span<const std::byte>> regions);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_GATHER_GATHER_MEMORY_H_
