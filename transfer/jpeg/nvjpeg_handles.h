// NvJpegDecoder's private parts (transfer/jpeg/nvjpeg_decoder.h), shared by
// its two rooms: the counters behind NvJpegMemory and NvJpegTiming with the
// budget check, nvJPEG's V2 allocator hooks over them, and the nvJPEG
// handles of one decoder. Only transfer/jpeg/nvjpeg_*.cc include it.
// Built only with nvJPEG (PINWHEEL_HAVE_NVJPEG).
//
// Thread-safety: Accounting is thread-safe (its mutex; the hooks run on
// whichever thread nvJPEG allocates from); Handles is thread-compatible
// (the decoder's one calling thread).
#ifndef PINWHEEL_TRANSFER_JPEG_NVJPEG_HANDLES_H_
#define PINWHEEL_TRANSFER_JPEG_NVJPEG_HANDLES_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>
#include <memory>
#include <nvjpeg.h>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "tbb/task_arena.h"

#include "pinning/base/mutex.h"
#include "transfer/jpeg/nvjpeg_decoder.h"

namespace pinwheel::internal {

// The counters behind NvJpegMemory, and the budget check. The allocation
// calls themselves (cudaMalloc, cudaHostAlloc) run outside the lock.
struct NvJpegDecoder::Accounting {
  struct Pool {
    size_t limit = 0;
    size_t bytes = 0;
    size_t peak = 0;
    size_t allocations = 0;
    absl::flat_hash_map<void*, size_t> sizes;
  };

  // Returns whether `size` more bytes fit `pool`'s budget, reserving them.
  bool Reserve(Pool& pool, size_t size) ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock lock(&mu);
    if (pool.limit != 0 && pool.bytes + size > pool.limit) {
      ++refused;
      return false;
    }
    pool.bytes += size;
    return true;
  }
  void Unreserve(Pool& pool, size_t size) ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock lock(&mu);
    pool.bytes -= size;
  }
  void Record(Pool& pool, void* ptr, size_t size) ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock lock(&mu);
    pool.sizes[ptr] = size;
    ++pool.allocations;
    if (pool.bytes > pool.peak) pool.peak = pool.bytes;
  }
  // Forgets `ptr`, returning the bytes it held (0 if unknown).
  void Forget(Pool& pool, void* ptr) ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock lock(&mu);
    auto it = pool.sizes.find(ptr);
    if (it == pool.sizes.end()) return;
    pool.bytes -= it->second;
    pool.sizes.erase(it);
  }

  mutable absl::Mutex mu;
  Pool device ABSL_GUARDED_BY(mu);
  Pool pinned ABSL_GUARDED_BY(mu);
  size_t refused ABSL_GUARDED_BY(mu) = 0;
  NvJpegTiming timing ABSL_GUARDED_BY(mu);
};

// Returns nvJPEG's V2 allocator hooks for device and pinned memory, counted
// and bounded by `accounting` (borrowed: it must outlive every nvJPEG
// handle created with them). They return 0 on success, as cudaMalloc does.
nvjpegDevAllocatorV2_t CountedDeviceAllocator(
    NvJpegDecoder::Accounting* accounting);
nvjpegPinnedAllocatorV2_t CountedPinnedAllocator(
    NvJpegDecoder::Accounting* accounting);

// Every nvJPEG handle of one decoder, destroyed in reverse order of
// creation (with the decoder's device current).
struct NvJpegDecoder::Handles {
  ~Handles();

  nvjpegDevAllocatorV2_t device_allocator{};
  nvjpegPinnedAllocatorV2_t pinned_allocator{};
  nvjpegHandle_t handle = nullptr;
  // One batched decode's state and what it reads (Note [overlapping batches]).
  struct Batched {
    nvjpegJpegState_t state = nullptr;
    cudaEvent_t done = nullptr;       // recorded after the batch that used it
    cudaEvent_t gpu_start = nullptr;  // around its decode, timed
    cudaEvent_t gpu_stop = nullptr;
    bool issued = false;  // a batch has used it since creation
    std::vector<const unsigned char*> data;
    std::vector<size_t> lengths;
    std::vector<nvjpegImage_t> destinations;
  };
  std::array<Batched, NvJpegDecoder::kStates> states;
  int next_state = 0;                       // the state the next batch uses
  std::vector<nvjpegJpegStream_t> streams;  // one parsed header per sample
  // The one-image path (see Note [backend]).
  nvjpegJpegDecoder_t alone_decoder = nullptr;
  nvjpegJpegState_t alone_state = nullptr;
  nvjpegBufferPinned_t alone_pinned = nullptr;
  nvjpegBufferDevice_t alone_device = nullptr;
  nvjpegDecodeParams_t alone_params = nullptr;
  cudaEvent_t done = nullptr;  // recorded after each Decode()'s work

  // Per-batch scratch, sized once to max_batch_size.
  std::vector<size_t> batched;  // sample indices
  std::vector<size_t> alone;
  std::vector<uint8_t> route;  // per sample: CheckSample()'s Route
  // check_threads > 1: the arena the host checks run on.
  std::unique_ptr<tbb::task_arena> check_arena;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_JPEG_NVJPEG_HANDLES_H_
