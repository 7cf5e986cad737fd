// Measures what one CUDA runtime call costs the host, for the calls pinwheel
// makes per batch, to explain W2's ceiling (small batches: the runtime calls,
// not the bytes, bound the batch rate). Prints one line per call: the mean
// host microseconds over many calls on one thread.
//
// Usage: cuda_call_cost [--calls=N] [--bytes=B]
#include <cstdio>
#include <cuda_runtime_api.h>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"

#include "samples/bench/probes/check_cuda.h"

ABSL_FLAG(int, calls, 200000, "calls timed per row");
ABSL_FLAG(int64_t, bytes, 512 << 10, "bytes of the timed cudaMemcpyAsync");

namespace {

template <typename F>
double MicrosPerCall(int calls, F&& call) {
  for (int i = 0; i < calls / 10; ++i) call();  // warm up
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  const std::chrono::duration<double, std::micro> took =
      std::chrono::steady_clock::now() - start;
  return took.count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int calls = absl::GetFlag(FLAGS_calls);
  const size_t bytes = static_cast<size_t>(absl::GetFlag(FLAGS_bytes));
  CHECK_CUDA(cudaSetDevice(0));
  cudaStream_t copy, compute;
  CHECK_CUDA(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  cudaEvent_t event;
  CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  void* host = nullptr;
  void* device = nullptr;
  CHECK_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocPortable));
  CHECK_CUDA(cudaMalloc(&device, bytes));

  std::printf(
      "host microseconds per CUDA runtime call (%d calls each, one thread)\n",
      calls);
  auto row = [](const char* name, double us) {
    std::printf("  %-44s %7.3f us\n", name, us);
  };
  row("cudaSetDevice (already current)",
      MicrosPerCall(calls, [] { cudaSetDevice(0); }));
  row("cudaEventRecord",
      MicrosPerCall(calls, [&] { cudaEventRecord(event, compute); }));
  CHECK_CUDA(cudaStreamSynchronize(compute));
  row("cudaEventQuery (completed)",
      MicrosPerCall(calls, [&] { cudaEventQuery(event); }));
  row("cudaEventSynchronize (completed)",
      MicrosPerCall(calls, [&] { cudaEventSynchronize(event); }));
  row("cudaStreamWaitEvent",
      MicrosPerCall(calls, [&] { cudaStreamWaitEvent(compute, event, 0); }));
  CHECK_CUDA(cudaStreamSynchronize(compute));
  const int copies = calls / 20;
  row(("cudaMemcpyAsync H2D pinned, " + std::to_string(bytes >> 10) +
       " KiB (issue only)")
          .c_str(),
      MicrosPerCall(copies, [&] {
        cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, copy);
      }));
  CHECK_CUDA(cudaStreamSynchronize(copy));
  // pinwheel's per-batch sequence on the cuda backend: copy + copy_done
  // record (transfer thread), WaitOn + consumed record (consumer), one
  // completed-event wait for the ring slot and one for the device buffer.
  const double batch = MicrosPerCall(copies, [&] {
    cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, copy);
    cudaEventRecord(event, copy);
    cudaStreamWaitEvent(compute, event, 0);
    cudaEventRecord(event, compute);
    cudaEventSynchronize(event);
    cudaEventSynchronize(event);
  });
  row("pinwheel's 6 calls per batch, one thread", batch);
  std::printf(
      "  => at most %.0f batches/s if every call of a batch were serialized\n",
      1e6 / batch);
  cudaFreeHost(host);
  cudaFree(device);
  cudaEventDestroy(event);
  cudaStreamDestroy(copy);
  cudaStreamDestroy(compute);
  return 0;
}
