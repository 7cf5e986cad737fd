// NvJpegDecoder: batched JPEG decode on the GPU with nvJPEG, into device
// buffers the caller owns, on one CUDA stream, with nvJPEG's own memory
// counted and bounded, and one bad image failing alone.
//
// Example:
//   NvJpegDecoderOptions options;
//   options.max_batch_size = 256;
//   PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<NvJpegDecoder> decoder,
//                             NvJpegDecoder::Create(/*device=*/0, stream,
//                             options));
//   std::vector<NvJpegSampleResult> results(jpegs.size());
//   PINWHEEL_RETURN_IF_ERROR(decoder->Decode(jpegs, outputs,
//   absl::MakeSpan(results)));
//   // results[i].status: this image's outcome; the pixels are ready when
//   // `stream` has passed the work Decode() queued (record an event).
//
// Built only with nvJPEG (PINWHEEL_HAVE_NVJPEG, see transfer/CMakeLists.txt).
// Two rooms: nvjpeg_decoder.cc (start, the host checks, the batched and
// one-image decodes) and nvjpeg_handles.{h,cc} (the allocator hooks, the
// memory accounting and the nvJPEG handles they share).
//
// Note [one bad image fails alone]
// nvjpegDecodeBatched fails or succeeds as a whole, and nvJPEG's hardware
// backend decodes some broken streams without complaint. So every sample is
// first checked on the host: its framing (CheckJpegFraming, which catches
// truncation), nvJPEG's header parse, its size against the output buffer and
// the decoder's limits. Only samples that pass go into the batched call. If
// the batched call still fails, the batch is decoded again one image at a
// time, so that the failure lands on the sample that caused it; the batched
// state is re-initialised at the start of every batch, so a failure never
// carries over into the next one.
//
// Note [backend]
// Create() tries nvJPEG's hardware backend (the NVJPG engines of A100/H100)
// first, then GPU_HYBRID, then DEFAULT; backend() says which one it got.
// The hardware backend decodes baseline JPEGs only; a sample it does not
// support (progressive, 4:1:1, ...) is decoded alone with the hybrid
// (CPU Huffman) decoder from the same handle, so every JPEG nvJPEG knows
// decodes whichever backend was chosen.
//
// Note [memory]
// nvJPEG's allocations that go through the allocator hooks (nvjpegCreateExV2
// and the V2 buffer allocators) are counted here, and one that would pass
// the budget in the options is refused (nvJPEG then reports
// NVJPEG_STATUS_ALLOCATOR_FAILURE, which becomes ResourceExhausted). nvJPEG
// grows its buffers to the largest batch and image it has seen and keeps
// them, so after the first batches of a data set the counters stay flat;
// memory() reports them. Measured on the H100 (2026-11-23): the GPU_HYBRID
// backend's memory all goes through the hooks (754,688 device and 8,626
// pinned bytes for batches of 8 small images, flat over 200 batches;
// 393,892,864 device bytes for batches of 256 at 500 x 375), but the
// hardware backend's batched path allocates its own buffers outside them (0
// bytes counted over 11 batches of 256 decoded by the engines): only its
// one-image path (progressive JPEGs) is counted. So with the hardware
// backend the budget does not bound nvJPEG's device memory; measuring it
// (cudaMemGetInfo around a warm-up at Build()) is left to the device stage.
//
// Note [parallel checks]
// With the hardware backend the engines are not what bounds the decode.
// On one H200 (2026-11-27, W4: make_images' 10,000 JPEGs of 471 x 426 and
// 101 KB, batches of 256, 14 workers) the 7 engines took 10.0 ms a batch,
// and nvjpegDecodeBatched returns only when they are done (9.6 ms on the
// host), but before it the host checks (framing, nvJPEG's header parse,
// the hardware support query: about 30 us an image) took 7.3 ms on the
// transfer thread: 16.9 ms a batch, 14,459 img/s against the engines'
// 25,600. So with check_threads > 1 the checks run on a oneTBB arena of
// that many threads (the calling thread one of them), each sample on its
// own parsed stream (nvJPEG lets threads share a handle, not a stream);
// the samples are then routed in batch order, so the outcome is the one a
// single thread gives. Measured in one call, 8 workers, median of 3: 1
// thread 14,830 img/s, 4 threads 20,846, 8 threads 22,469 (checks 0.86 ms
// a batch). Tried first and dropped: splitting each batch among 2 to 4
// decoders with their own handles, streams and threads: 16,369 to 17,487
// img/s at 14 workers, since every decoder's call still lasted the
// engines' whole time (about 10 ms however small its share); with 8 check
// threads 2 decoders gave 21,592 against one's 22,469.
//
// Note [beside a training step]
// Beside a training step the decode is slowed, not the step. On one H200
// (2026-11-28, W4, 8 workers, two bf16 GEMMs of 20480 queued after each
// batch): the GEMMs ran 45-49 ms a step on the GPU against 50 ms alone,
// but a step took 58-61 ms, the stream waiting for data, because each
// nvjpegDecodeBatched call lasted 53-60 ms instead of ~10 (and its GPU
// part as long). A probe with nvJPEG alone
// (samples/bench/probes/nvjpeg_beside_gemm.cc) shows that the call waits
// for the work queued on another stream while that work fills every SM:
// 2 GEMMs of 18 ms queued: 47-55 ms; 4: 90-99 ms; 2 or 4 plain kernels of
// 18 ms on every SM (no cuBLAS): 43 and 77 ms; 16 kernels of 1.2 ms: 20
// ms; 64 GEMMs of 4096 (0.16 ms each): 18 ms. Neither YUV output (no
// colour conversion), the memory-pool, no-pipeline or pre-allocation
// flags, a green context of 8 or 16 SMs nor stream priority changes it;
// GEMMs held to 116 or 66 SMs (cublasSetSmCountTarget) do (11 ms). Inside
// the loader a second wait held the call even then, the hardware queues:
// see Note [hardware queues].
//
// Note [hardware queues]
// CUDA feeds the GPU through CUDA_DEVICE_MAX_CONNECTIONS hardware queues
// (1..32, default 8) and maps streams onto them; work on streams that share
// one runs in order. With 8, the decode's work waited behind the training
// step's: on one H200 (2026-11-28) the probe's call beside 64 queued GEMMs
// of 4096 took 16.3-18.3 ms with 8 queues and 7.5-9.0 with 32 (alone 8); the
// loader's call beside GEMMs on 66 SMs 80 ms with 8 and 48 with 32. In a
// real job that is the whole tax: ResNet-50 under torchrun on one GPU
// (samples/python/train_ddp.py, 8 workers) with decode="gpu" ran at
// 4,293-4,333 img/s waiting for data 13-20 % of the time with 8 queues, and
// at 4,459-4,502 (0.3-1.6 %) with 32, against 4,495-4,512 with decode="cpu":
// 0.988-0.9996 of it, in three pairs over two calls; on two H200s (2 ranks)
// 0.984-0.985 with 32 queues, no rank waiting, and 0.90 with 8. Beside a
// step of 300 GEMMs of 4096 (62 ms) the step grew by +5.5..+6.4 % with 32
// queues against +9.4..+10.5 % with 8 (decode="cpu": +4.7..+4.8 %); beside
// two GEMMs of 20480 (kernels of 25 ms on every SM) 32 queues do not help
// (+14..+15 %): the first wait above. W4 alone is the same with either
// (interleaved, 4 workers: 18,999-21,552 img/s with 32, 18,819-20,673 with
// 8). CUDA reads the variable once, at cuInit: set after it (the probe's
// --set_connections_after) it changes nothing. So `import pinwheel` sets it
// to 32 unless the user set it (before torch's first CUDA call only if
// pinwheel is imported first), C++ trainers call
// pinwheel::PreferCudaQueues() (pinning/base/cuda_queues.h) first thing in
// main, and JpegDecodeTransform's report says the value in force and, below
// 32, what it costs.
//
// Note [overlapping batches]
// A batch's host work (the framing checks, nvJPEG's header parse) runs
// before Decode() waits for the previous batch, so it overlaps that batch's
// decode; the wait comes only before the nvJPEG calls, which reuse the
// batched state's staging buffers. The decoder keeps kStates batched
// states and waits for the last batch that used the one it takes. kStates
// is 1, measured on the H100 (2026-11-24, W4, 4 workers, one call): with 2
// states, alternating, W4 was no faster (15,201-15,319 img/s against
// 15,657-15,733 with 1), and under compute-sanitizer racecheck the resumed
// GPU image pipeline's pixels differed from an uninterrupted run in 2 of 2
// runs (0 of 2 with 1 state): nvJPEG's hardware path seems to share
// buffers between the states of one handle. The one-image path (its own
// state) waits for everything before it.
//
// Thread-compatible: one thread at a time may call a decoder (the transfer
// stage's thread); memory() and timing() may be read from any thread.
#ifndef PINWHEEL_TRANSFER_JPEG_NVJPEG_DECODER_H_
#define PINWHEEL_TRANSFER_JPEG_NVJPEG_DECODER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pinwheel::internal {

// Which nvJPEG implementation a decoder runs.
enum class NvJpegBackend {
  kAuto,       // Create(): hardware if the GPU has it, else GPU hybrid
  kHardware,   // the GPU's JPEG engines (NVJPEG_BACKEND_HARDWARE)
  kGpuHybrid,  // Huffman decode on the GPU for large batches (GPU_HYBRID)
  kDefault,    // nvJPEG's default (CPU Huffman, IDCT on the GPU)
};

// Returns "hardware", "gpu_hybrid", "default" or "auto".
std::string NvJpegBackendName(NvJpegBackend backend);

struct NvJpegDecoderOptions {
  // The backend to use; kAuto picks (see Note [backend]). Naming one that
  // the GPU lacks makes Create() fail with its nvJPEG error.
  NvJpegBackend backend = NvJpegBackend::kAuto;

  // The most images one Decode() takes; 1 or more.
  int max_batch_size = 256;

  // The largest image decoded, in pixels per side; a larger one is a
  // per-sample InvalidArgument (it would grow nvJPEG's buffers without
  // bound). 1 or more.
  int max_image_width = 8192;
  int max_image_height = 8192;

  // Budgets for nvJPEG's own allocations, in bytes; 0 means unbounded. An
  // allocation past its budget fails (see Note [memory]).
  size_t device_bytes_limit = 0;
  size_t pinned_bytes_limit = 0;

  // Threads that run a batch's host checks side by side (Note [parallel
  // checks]), the calling thread one of them; 1 to 64.
  int check_threads = 1;
};

// One output image: interleaved RGB (3 bytes per pixel, row-major) in
// device memory owned by the caller.
struct NvJpegOutput {
  uint8_t* rgb = nullptr;  // device memory, at least pitch * max_height bytes
  size_t pitch = 0;        // bytes from one row to the next, >= 3 * max_width
  int max_width = 0;       // the largest image this buffer holds
  int max_height = 0;
};

// What Decode() did with one image.
struct NvJpegSampleResult {
  // OK, or why this image was not decoded: "sample 3: ..." with the check
  // or nvJPEG call and nvJPEG's error name. The output's contents are
  // unspecified when not OK.
  absl::Status status;
  int width = 0;  // the decoded image's size when OK
  int height = 0;
  bool hardware = false;  // decoded by the hardware engines
};

// nvJPEG's memory, as counted by the decoder's allocator hooks.
struct NvJpegMemory {
  size_t device_bytes = 0;  // now
  size_t pinned_bytes = 0;
  size_t device_peak_bytes = 0;  // the most at any time
  size_t pinned_peak_bytes = 0;
  size_t device_allocations = 0;  // calls, since creation
  size_t pinned_allocations = 0;
  size_t refused_allocations = 0;  // refused by a budget
};

// Where Decode() spends its time, summed since creation (timing()).
struct NvJpegTiming {
  int64_t batches = 0;   // Decode() calls that queued work
  int64_t images = 0;    // images they were given
  double check_ms = 0;   // host: framing checks and nvJPEG's header parse
  double wait_ms = 0;    // host: waiting for a staging state to come free
  double submit_ms = 0;  // host: the nvJPEG decode calls
  // GPU: from the stream reaching a batch's decode to its end, for the
  // gpu_batches whose decode has been seen to finish (a batch's time is
  // read when its state is reused, so the last two are not in yet).
  double gpu_ms = 0;
  int64_t gpu_batches = 0;
};

class NvJpegDecoder {
 public:
  // The batched states the decoder cycles through (Note [overlapping
  // batches]): nvJPEG sizes each on first use, so its memory is warm after
  // this many batches of the largest size.
  static constexpr int kStates = 1;

  // Returns a decoder for CUDA device `device` that queues its GPU work on
  // `stream` (a stream of that device, borrowed: it must outlive the
  // decoder). InvalidArgument for bad options; the nvJPEG or CUDA error
  // when the library or the chosen backend cannot start.
  static absl::StatusOr<std::unique_ptr<NvJpegDecoder>> Create(
      int device, cudaStream_t stream, const NvJpegDecoderOptions& options);

  // Waits for the stream to pass the decoder's last work, then frees
  // everything nvJPEG allocated.
  ~NvJpegDecoder();
  NvJpegDecoder(const NvJpegDecoder&) = delete;
  NvJpegDecoder& operator=(const NvJpegDecoder&) = delete;

  // Decodes jpegs[i] into outputs[i] for every i, queued on the stream, and
  // fills results[i]. Returns OK when the batch was processed, whatever
  // happened to single images (see results); a non-OK return (a CUDA error,
  // InvalidArgument for mismatched spans or more than max_batch_size
  // images) means results are not to be trusted.
  // The call checks and parses the batch on the host, then waits for the
  // stream to pass the last Decode() that used the batched state it takes
  // (nvJPEG reuses a state's staging buffers; Note [overlapping batches]),
  // then returns once the work is queued; the pixels are ready when the
  // stream passes that work.
  // REQUIRES: jpegs[i]'s bytes (host memory, pinned or not) stay unchanged
  // until the stream has passed this batch; outputs[i] stay allocated.
  absl::Status Decode(absl::Span<const absl::Span<const uint8_t>> jpegs,
                      absl::Span<const NvJpegOutput> outputs,
                      absl::Span<NvJpegSampleResult> results);

  // Returns the backend Create() chose (never kAuto).
  NvJpegBackend backend() const { return backend_; }

  // Returns a line for logs and stats: the backend, the hardware engines
  // when it is the hardware one, and why the backends tried before it were
  // not taken ("gpu_hybrid (hardware: nvjpegCreateExV2:
  // NVJPEG_STATUS_ARCH_MISMATCH)").
  const std::string& backend_report() const { return backend_report_; }

  // Returns nvJPEG's memory now (thread-safe).
  NvJpegMemory memory() const;

  // Returns where Decode() spent its time so far (thread-safe).
  NvJpegTiming timing() const;

  // The allocator's counters: public only so that the C callbacks in the
  // .cc reach them; not part of the interface.
  struct Accounting;

 private:
  struct Handles;
  NvJpegDecoder(int device, cudaStream_t stream,
                const NvJpegDecoderOptions& options);

  absl::Status Start();
  // Where CheckSample() sends a sample.
  enum Route : uint8_t { kFailed, kBatched, kAlone };
  // Checks sample `i` on the host (Note [one bad image fails alone]): its
  // output buffer, framing and header. Sets `result` and returns where the
  // sample goes. Thread-safe for distinct `i` (Note [parallel checks]).
  Route CheckSample(size_t i, absl::Span<const uint8_t> jpeg,
                    const NvJpegOutput& output, NvJpegSampleResult& result);
  // Decodes the queued batched samples with batched state `state`; a
  // failing call leaves them to the one-image path, or fails them all when
  // out of budget.
  void DecodeBatched(size_t state,
                     absl::Span<const absl::Span<const uint8_t>> jpegs,
                     absl::Span<const NvJpegOutput> outputs,
                     absl::Span<NvJpegSampleResult> results);
  // Decodes sample `i` alone with the hybrid decoder; sets results[i].
  void DecodeAlone(size_t i, absl::Span<const absl::Span<const uint8_t>> jpegs,
                   absl::Span<const NvJpegOutput> outputs,
                   absl::Span<NvJpegSampleResult> results);

  const int device_;
  cudaStream_t const stream_;
  const NvJpegDecoderOptions options_;
  NvJpegBackend backend_ = NvJpegBackend::kAuto;
  std::string backend_report_;
  bool issued_ = false;  // a Decode() has queued work on the stream
  std::unique_ptr<Accounting> accounting_;
  std::unique_ptr<Handles> handles_;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_JPEG_NVJPEG_DECODER_H_
