// nvjpeg_beside_gemm: how long one nvjpegDecodeBatched call keeps the host
// while another stream runs long GEMMs (issue 32: why the GPU decode falls
// behind a training step). No pinwheel code.
//
// Usage: nvjpeg_beside_gemm --jpeg=/tmp/w4/c000/000000.jpg [--batch=256]
//            [--gemm_n=20480] [--calls=12] [--formats=rgbi,yuv]
//            [--variants=default,pools,...] [--gemms_per_call=2]
//            [--gemm_sms=0] [--green_sms=16] [--queue=gemm]
//
// For each handle set-up (--variants) and output format it decodes `batch`
// copies of the file: 3 calls to warm up, then `calls` calls alone, then
// `calls` calls each after --gemms_per_call bf16 GEMMs of gemm_n (on
// --gemm_sms SMs) were queued on a second stream, as a training step
// queues its work before the next batch. It prints the host milliseconds
// of a call (median, min, max; and of its nvjpegDecodeBatchedInitialize
// part): near the alone figure when the call does not wait for the GEMMs,
// near the queued GEMMs' time when it does. Figures of one H200 in
// samples/bench/results/h200-2026-11-28-s11-gpu-decode-beside-step.txt and
// (--queue=spin, --set_connections_after, CUDA_DEVICE_MAX_CONNECTIONS)
// samples/bench/results/h200-2026-11-28-s12-hardware-queues.txt.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda.h>
#include <fstream>
#include <iterator>
#include <nvjpeg.h>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "samples/bench/probes/check_cuda.h"
#include "tests/support/spin_kernel.h"

ABSL_FLAG(std::string, jpeg, "", "a baseline JPEG");
ABSL_FLAG(int, batch, 256, "images a call");
ABSL_FLAG(int, gemm_n, 20480, "the GEMMs' side");
ABSL_FLAG(int, calls, 12, "timed calls a row");
ABSL_FLAG(std::string, formats, "rgbi", "output formats: rgbi, yuv");
ABSL_FLAG(std::string, variants, "default,pools,no_pipeline,prealloc",
          "the handle's set-up: default (NVJPEG_FLAGS_DEFAULT), pools "
          "(NVJPEG_FLAGS_ENABLE_MEMORY_POOLS), no_pipeline "
          "(NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE), prealloc (default + "
          "nvjpegDecodeBatchedPreAllocate for the batch), hybrid (the "
          "GPU_HYBRID backend instead of the engines), green (default, "
          "in a green context of --green_sms SMs)");
ABSL_FLAG(int, green_sms, 16, "the green context's SMs");
ABSL_FLAG(int, gemms_per_call, 2, "GEMMs queued before each timed call");
ABSL_FLAG(std::string, queue, "gemm",
          "what is queued before each call: gemm (cuBLAS bf16 GEMMs of "
          "--gemm_n) or spin (a kernel of --spin_ms filling every SM's "
          "thread slots, no cuBLAS)");
ABSL_FLAG(double, spin_ms, 18, "each spin kernel's length");
ABSL_FLAG(std::string, set_connections_after, "",
          "init or context: set CUDA_DEVICE_MAX_CONNECTIONS=32 (when unset) "
          "after cuInit, or after the primary context started, to see when "
          "CUDA reads it");
ABSL_FLAG(int, gemm_sms, 0,
          "> 0: cublasSetSmCountTarget for the GEMMs (0: all SMs)");

#define CHECK_CU(call)                                                    \
  do {                                                                    \
    const CUresult check_cu_result = (call);                              \
    if (check_cu_result != CUDA_SUCCESS) {                                \
      std::fprintf(stderr, "%s:%d %s: CUresult %d\n", __FILE__, __LINE__, \
                   #call, static_cast<int>(check_cu_result));             \
      std::exit(1);                                                       \
    }                                                                     \
  } while (0)

#define CHECK_NVJPEG(call)                                                     \
  do {                                                                         \
    const nvjpegStatus_t check_nvjpeg_status = (call);                         \
    if (check_nvjpeg_status != NVJPEG_STATUS_SUCCESS) {                        \
      std::fprintf(stderr, "%s:%d %s: nvJPEG status %d\n", __FILE__, __LINE__, \
                   #call, static_cast<int>(check_nvjpeg_status));              \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

namespace {

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Print(const char* what, std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  std::printf("  %-22s median %7.2f ms [%.2f-%.2f] over %zu calls\n", what,
              ms[ms.size() / 2], ms.front(), ms.back(), ms.size());
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::ifstream file(absl::GetFlag(FLAGS_jpeg), std::ios::binary);
  const std::vector<unsigned char> jpeg((std::istreambuf_iterator<char>(file)),
                                        std::istreambuf_iterator<char>());
  if (jpeg.empty()) {
    std::fprintf(stderr, "--jpeg: no file read\n");
    return 2;
  }
  const std::string queue = absl::GetFlag(FLAGS_queue);
  const std::string after = absl::GetFlag(FLAGS_set_connections_after);
  if (queue != "gemm" && queue != "spin") {
    std::fprintf(stderr, "--queue=%s: must be gemm or spin\n", queue.c_str());
    return 2;
  }
  if (!after.empty() && after != "init" && after != "context") {
    std::fprintf(stderr,
                 "--set_connections_after=%s: must be init or context\n",
                 after.c_str());
    return 2;
  }
  if (!after.empty()) {
    if (after == "init") {
      CHECK_CU(cuInit(0));
    } else {
      CHECK_CUDA(cudaFree(nullptr));
    }
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
    std::printf("CUDA_DEVICE_MAX_CONNECTIONS=%s set after %s\n",
                getenv("CUDA_DEVICE_MAX_CONNECTIONS"), after.c_str());
  }
  const int batch = absl::GetFlag(FLAGS_batch);
  const int n = absl::GetFlag(FLAGS_gemm_n);
  const int calls = absl::GetFlag(FLAGS_calls);
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  int least = 0, greatest = 0;
  CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t gemm_stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&gemm_stream, cudaStreamNonBlocking));

  nvjpegHandle_t info = nullptr;
  CHECK_NVJPEG(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr,
                              NVJPEG_FLAGS_DEFAULT, &info));
  int components = 0;
  nvjpegChromaSubsampling_t subsampling{};
  int widths[NVJPEG_MAX_COMPONENT] = {};
  int heights[NVJPEG_MAX_COMPONENT] = {};
  CHECK_NVJPEG(nvjpegGetImageInfo(info, jpeg.data(), jpeg.size(), &components,
                                  &subsampling, widths, heights));
  nvjpegDestroy(info);
  std::printf("%s; %d x %d, %d components, subsampling %d; batch %d\n",
              prop.name, widths[0], heights[0], components,
              static_cast<int>(subsampling), batch);

  // bf16 GEMMs, C = A * B, on the second stream.
  cublasHandle_t blas = nullptr;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetStream(blas, gemm_stream);
  if (absl::GetFlag(FLAGS_gemm_sms) > 0) {
    cublasSetSmCountTarget(blas, absl::GetFlag(FLAGS_gemm_sms));
  }
  void* a = nullptr;
  void* c = nullptr;
  const size_t matrix = static_cast<size_t>(n) * n * 2;
  CHECK_CUDA(cudaMalloc(&a, matrix));
  CHECK_CUDA(cudaMalloc(&c, matrix));
  CHECK_CUDA(cudaMemset(a, 0x3c, matrix));
  const float alpha = 1, beta = 0;
  const bool spin = queue == "spin";
  auto gemm = [&] {
    if (spin) {
      CHECK_CUDA(static_cast<cudaError_t>(
          pinwheel::testing_support::LaunchSpinOnEverySm(
              gemm_stream, absl::GetFlag(FLAGS_spin_ms))));
      return;
    }
    cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a,
                 CUDA_R_16BF, n, a, CUDA_R_16BF, n, &beta, c, CUDA_R_16BF, n,
                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  cudaEvent_t start = nullptr, stop = nullptr;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  gemm();
  CHECK_CUDA(cudaEventRecord(start, gemm_stream));
  gemm();
  CHECK_CUDA(cudaEventRecord(stop, gemm_stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float gemm_ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&gemm_ms, start, stop));
  const std::string what =
      spin ? absl::StrCat("spin kernel of --spin_ms=",
                          absl::GetFlag(FLAGS_spin_ms))
           : absl::StrCat("GEMM of ", n, " (SM target ",
                          absl::GetFlag(FLAGS_gemm_sms), ")");
  std::printf("one %s alone: %.2f ms; %d queued before each call\n",
              what.c_str(), gemm_ms, absl::GetFlag(FLAGS_gemms_per_call));

  std::vector<const unsigned char*> data(batch, jpeg.data());
  std::vector<size_t> lengths(batch, jpeg.size());
  const std::vector<std::string> formats =
      absl::StrSplit(absl::GetFlag(FLAGS_formats), ',');
  const std::vector<std::string> variants =
      absl::StrSplit(absl::GetFlag(FLAGS_variants), ',');
  // The green context, made only when a variant asks for it: --green_sms
  // of the device's SMs, memory shared with the primary context
  // (cuCtxFromGreenCtx's documentation).
  CUcontext green = nullptr;
  if (std::find(variants.begin(), variants.end(), "green") != variants.end()) {
    CUdevice device = 0;
    CHECK_CU(cuDeviceGet(&device, 0));
    CUdevResource all{};
    CHECK_CU(cuDeviceGetDevResource(device, &all, CU_DEV_RESOURCE_TYPE_SM));
    CUdevResource part{};
    CUdevResource rest{};
    unsigned int groups = 1;
    CHECK_CU(cuDevSmResourceSplitByCount(
        &part, &groups, &all, &rest, 0,
        static_cast<unsigned>(absl::GetFlag(FLAGS_green_sms))));
    CUdevResourceDesc desc = nullptr;
    CHECK_CU(cuDevResourceGenerateDesc(&desc, &part, 1));
    CUgreenCtx green_ctx = nullptr;
    CHECK_CU(cuGreenCtxCreate(&green_ctx, desc, device,
                              CU_GREEN_CTX_DEFAULT_STREAM));
    CHECK_CU(cuCtxFromGreenCtx(&green, green_ctx));
    std::printf("green context: %u of %u SMs\n", part.sm.smCount,
                all.sm.smCount);
  }
  for (const std::string& variant : variants) {
    const bool in_green = variant == "green";
    // The decode's calls run with the green context current.
    auto enter = [&] {
      if (in_green) CHECK_CU(cuCtxPushCurrent(green));
    };
    auto leave = [&] {
      CUcontext popped = nullptr;
      if (in_green) CHECK_CU(cuCtxPopCurrent(&popped));
    };
    enter();
    cudaStream_t decode_stream = nullptr;
    CHECK_CUDA(cudaStreamCreateWithPriority(&decode_stream,
                                            cudaStreamNonBlocking, greatest));
    const unsigned flags = variant == "pools" ? NVJPEG_FLAGS_ENABLE_MEMORY_POOLS
                           : variant == "no_pipeline"
                               ? NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE
                               : NVJPEG_FLAGS_DEFAULT;
    nvjpegHandle_t handle = nullptr;
    CHECK_NVJPEG(nvjpegCreateEx(variant == "hybrid" ? NVJPEG_BACKEND_GPU_HYBRID
                                                    : NVJPEG_BACKEND_HARDWARE,
                                nullptr, nullptr, flags, &handle));
    nvjpegJpegState_t state = nullptr;
    CHECK_NVJPEG(nvjpegJpegStateCreate(handle, &state));
    for (const std::string& format : formats) {
      const bool yuv = format == "yuv";
      const nvjpegOutputFormat_t output =
          yuv ? NVJPEG_OUTPUT_YUV : NVJPEG_OUTPUT_RGBI;
      if (variant == "prealloc") {
        CHECK_NVJPEG(nvjpegDecodeBatchedPreAllocate(
            handle, state, batch, widths[0], heights[0], subsampling, output));
      }
      std::vector<nvjpegImage_t> out(batch);
      std::vector<void*> owned;
      for (int i = 0; i < batch; ++i) {
        for (int p = 0; p < (yuv ? components : 1); ++p) {
          const size_t pitch =
              yuv ? widths[p] : 3 * static_cast<size_t>(widths[0]);
          void* plane = nullptr;
          CHECK_CUDA(cudaMalloc(&plane, pitch * heights[yuv ? p : 0]));
          owned.push_back(plane);
          out[i].channel[p] = static_cast<unsigned char*>(plane);
          out[i].pitch[p] = pitch;
        }
      }
      std::vector<double>* init_ms = nullptr;  // the Initialize() part
      auto call = [&] {
        const double t0 = NowMs();
        CHECK_NVJPEG(
            nvjpegDecodeBatchedInitialize(handle, state, batch, 1, output));
        if (init_ms != nullptr) init_ms->push_back(NowMs() - t0);
        CHECK_NVJPEG(nvjpegDecodeBatched(handle, state, data.data(),
                                         lengths.data(), out.data(),
                                         decode_stream));
        return NowMs() - t0;
      };
      for (int i = 0; i < 3; ++i) call();
      CHECK_CUDA(cudaStreamSynchronize(decode_stream));
      std::vector<double> alone, beside, init_alone, init_beside;
      init_ms = &init_alone;
      for (int i = 0; i < calls; ++i) alone.push_back(call());
      CHECK_CUDA(cudaStreamSynchronize(decode_stream));
      // As a training loop does: two GEMMs queued, then the next batch.
      init_ms = &init_beside;
      for (int i = 0; i < calls; ++i) {
        leave();
        for (int g = 0; g < absl::GetFlag(FLAGS_gemms_per_call); ++g) gemm();
        enter();
        beside.push_back(call());
      }
      CHECK_CUDA(cudaStreamSynchronize(decode_stream));
      CHECK_CUDA(cudaStreamSynchronize(gemm_stream));
      std::printf("%s, output %s:\n", variant.c_str(), format.c_str());
      Print("alone", alone);
      Print("  of which Initialize", init_alone);
      Print("after the GEMMs queued", beside);
      Print("  of which Initialize", init_beside);
      for (void* p : owned) CHECK_CUDA(cudaFree(p));
    }
    nvjpegJpegStateDestroy(state);
    nvjpegDestroy(handle);
    CHECK_CUDA(cudaStreamDestroy(decode_stream));
    leave();
  }
  return 0;
}
