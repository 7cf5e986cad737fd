#include "transfer/jpeg/nvjpeg_handles.h"

namespace pinwheel::internal {
namespace {

using Accounting = NvJpegDecoder::Accounting;

// The allocator hooks: plain C callbacks over Accounting.
int DeviceMalloc(void* ctx, void** ptr, size_t size, cudaStream_t) {
  auto* accounting = static_cast<Accounting*>(ctx);
  if (!accounting->Reserve(accounting->device, size)) return 1;
  const cudaError_t error = cudaMalloc(ptr, size);
  if (error != cudaSuccess) {
    accounting->Unreserve(accounting->device, size);
    return static_cast<int>(error);
  }
  accounting->Record(accounting->device, *ptr, size);
  return 0;
}

int DeviceFree(void* ctx, void* ptr, size_t, cudaStream_t) {
  auto* accounting = static_cast<Accounting*>(ctx);
  if (ptr == nullptr) return 0;
  const cudaError_t error = cudaFree(ptr);
  accounting->Forget(accounting->device, ptr);
  return static_cast<int>(error);
}

int PinnedMalloc(void* ctx, void** ptr, size_t size, cudaStream_t) {
  auto* accounting = static_cast<Accounting*>(ctx);
  if (!accounting->Reserve(accounting->pinned, size)) return 1;
  const cudaError_t error = cudaHostAlloc(ptr, size, cudaHostAllocDefault);
  if (error != cudaSuccess) {
    accounting->Unreserve(accounting->pinned, size);
    return static_cast<int>(error);
  }
  accounting->Record(accounting->pinned, *ptr, size);
  return 0;
}

int PinnedFree(void* ctx, void* ptr, size_t, cudaStream_t) {
  auto* accounting = static_cast<Accounting*>(ctx);
  if (ptr == nullptr) return 0;
  const cudaError_t error = cudaFreeHost(ptr);
  accounting->Forget(accounting->pinned, ptr);
  return static_cast<int>(error);
}

}  // namespace

nvjpegDevAllocatorV2_t CountedDeviceAllocator(Accounting* accounting) {
  return {DeviceMalloc, DeviceFree, accounting};
}

nvjpegPinnedAllocatorV2_t CountedPinnedAllocator(Accounting* accounting) {
  return {PinnedMalloc, PinnedFree, accounting};
}

NvJpegDecoder::Handles::~Handles() {
  if (done != nullptr) cudaEventDestroy(done);
  for (Batched& b : states) {
    if (b.done != nullptr) cudaEventDestroy(b.done);
    if (b.gpu_start != nullptr) cudaEventDestroy(b.gpu_start);
    if (b.gpu_stop != nullptr) cudaEventDestroy(b.gpu_stop);
    if (b.state != nullptr) nvjpegJpegStateDestroy(b.state);
  }
  if (alone_params != nullptr) nvjpegDecodeParamsDestroy(alone_params);
  if (alone_state != nullptr) nvjpegJpegStateDestroy(alone_state);
  if (alone_pinned != nullptr) nvjpegBufferPinnedDestroy(alone_pinned);
  if (alone_device != nullptr) nvjpegBufferDeviceDestroy(alone_device);
  if (alone_decoder != nullptr) nvjpegDecoderDestroy(alone_decoder);
  for (nvjpegJpegStream_t s : streams) nvjpegJpegStreamDestroy(s);
  if (handle != nullptr) nvjpegDestroy(handle);
}

}  // namespace pinwheel::internal
