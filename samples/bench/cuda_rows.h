// The rows of the benchmark that talk to CUDA directly rather than through
// pinwheel: the raw pinned copy limit, a pageable cudaMemcpy, the naive
// loader (what DataLoader(pin_memory=True) does), W3's fixed compute
// step (two bf16 GEMMs with cuBLAS) and w2w's token widening. In a build
// without the cuda backend every function here returns FailedPrecondition and
// the caller skips the row with a note.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(Measurement raw,
//       MeasureRawPinnedCopy(/*ordinal=*/0, bytes, /*batches=*/100,
//                            /*warmup=*/5));
#ifndef PINWHEEL_SAMPLES_BENCH_CUDA_ROWS_H_
#define PINWHEEL_SAMPLES_BENCH_CUDA_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "samples/bench/report.h"
#include "transfer/sample_layout.h"

namespace pinwheel::bench {

// Returns whether this binary was built with CUDA (the rows below work).
bool CudaRowsBuilt();

// A non-blocking CUDA stream owned by the benchmark: the consumer's stream.
// Thread-compatible. Destroying it synchronizes the stream first.
class ConsumerStream {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ConsumerStream>> Create(
      int ordinal);
  ConsumerStream(const ConsumerStream&) = delete;
  ConsumerStream& operator=(const ConsumerStream&) = delete;
  ~ConsumerStream();

  // Returns the cudaStream_t, for Stream::Borrow().
  void* native() const { return native_; }
  // Blocks until the stream's queued work has finished.
  [[nodiscard]] absl::Status Synchronize() const;

 private:
  explicit ConsumerStream(void* native) : native_(native) {}
  void* native_;
};

// What the consumer queues on its stream for each batch once it waited for
// it (W3: two GEMMs; w2w: widening the token windows). Not thread-safe.
class ConsumerStep {
 public:
  virtual ~ConsumerStep() = default;
  // Queues the step for the batch whose first field starts at device
  // address `batch` (a step that does not read the batch ignores it) on
  // `stream` (a cudaStream_t) and returns at once.
  [[nodiscard]] virtual absl::Status EnqueueFor(const void* batch,
                                                void* stream) = 0;
};

// W3's compute step: C = A·B then D = C·B, bf16 n×n matrices, fp32
// accumulation (cublasGemmEx, CUDA_R_16BF, CUBLAS_COMPUTE_32F). Owns its
// cuBLAS handle and 4 device matrices. Not thread-safe.
class GemmStep final : public ConsumerStep {
 public:
  // Allocates and fills the matrices on device `ordinal`. sm_count_target
  // > 0: cuBLAS is asked to use at most that many SMs
  // (cublasSetSmCountTarget), leaving the rest to other streams' kernels.
  // A step is `pairs` pairs of GEMMs (many short kernels, as a real step
  // has, when n is small).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GemmStep>> Create(
      int ordinal, int n, int sm_count_target = 0, int pairs = 1);
  GemmStep(const GemmStep&) = delete;
  GemmStep& operator=(const GemmStep&) = delete;
  ~GemmStep();

  // Queues the step's GEMMs on `stream` (a cudaStream_t) and returns at once.
  [[nodiscard]] absl::Status Enqueue(void* stream);
  // Enqueue(stream) between two events, so that QueuedGpuMs() can say how
  // long the GEMMs ran on the GPU once the stream reached them.
  [[nodiscard]] absl::Status EnqueueTimed(void* stream);
  // Waits for the last EnqueueTimed() and returns the mean GPU milliseconds
  // of the EnqueueTimed() steps (0 if none). Set against TimeAloneMs(): the
  // same means the GEMMs ran as fast beside the loader, and a longer step
  // came from the stream waiting for data; more means they were slowed.
  [[nodiscard]] absl::StatusOr<double> QueuedGpuMs();
  // Returns the milliseconds of one step alone: `steps` steps queued back to
  // back on `stream` after `warmup` untimed ones, timed with cuda events.
  [[nodiscard]] absl::StatusOr<double> TimeAloneMs(void* stream, int steps,
                                                   int warmup);
  size_t device_bytes() const;
  // Enqueue(stream): the GEMMs do not read the batch.
  [[nodiscard]] absl::Status EnqueueFor(const void* batch,
                                        void* stream) override;

  struct Impl;

 private:
  explicit GemmStep(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// w2w's consumer step: widens a batch of `batch` token windows (field 0 of
// a TokenOutput::kWindow batch: [batch, seq_len + 1] tokens of token_bytes)
// into two int64 [batch, seq_len] device arrays, input and target, that it
// allocates once, with the library's WidenTokens transform
// (transfer/widen_tokens.h) run by hand on the consumer's stream: the
// consumer ends with the tensors W2 ships. Not thread-safe.
class WidenStep final : public ConsumerStep {
 public:
  // Allocates input and target on device `ordinal`. InvalidArgument for
  // token_bytes not 1, 2, 4 or 8, batch < 1 or seq_len < 1.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<WidenStep>> Create(
      int ordinal, int token_bytes, bool signed_tokens, int64_t batch,
      int64_t seq_len);
  WidenStep(const WidenStep&) = delete;
  WidenStep& operator=(const WidenStep&) = delete;
  ~WidenStep() override;

  // Queues the widening of the windows at device address `batch` on
  // `stream`; Internal naming the CUDA error when the launch fails.
  [[nodiscard]] absl::Status EnqueueFor(const void* batch,
                                        void* stream) override;
  // Waits for `stream` and returns input and target copied to the host
  // (batch * seq_len values each): for checks, not for the timed loop.
  [[nodiscard]] absl::StatusOr<
      std::pair<std::vector<int64_t>, std::vector<int64_t>>>
  CopyOut(void* stream) const;
  size_t device_bytes() const;

  struct Impl;

 private:
  explicit WidenStep(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The copy limit: `batches` cudaMemcpyAsync of `bytes` from one page-locked
// buffer to one device buffer on one stream, timed with cuda events. The
// buffers, stream and events are allocated once, so the row can be measured
// again between other rows at little cost. Not thread-safe.
class RawPinnedCopier {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RawPinnedCopier>> Create(
      int ordinal, size_t bytes);
  RawPinnedCopier(const RawPinnedCopier&) = delete;
  RawPinnedCopier& operator=(const RawPinnedCopier&) = delete;
  ~RawPinnedCopier();

  // Copies `warmup` untimed batches, then times `batches` (>= 1).
  [[nodiscard]] absl::StatusOr<Measurement> Measure(int batches, int warmup);

  struct Impl;

 private:
  explicit RawPinnedCopier(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// RawPinnedCopier::Create(ordinal, bytes), then Measure(batches, warmup).
[[nodiscard]] absl::StatusOr<Measurement> MeasureRawPinnedCopy(int ordinal,
                                                               size_t bytes,
                                                               int batches,
                                                               int warmup);

// `batches` synchronous cudaMemcpy of `bytes` from ordinary (pageable,
// touched) host memory, timed on the wall clock.
[[nodiscard]] absl::StatusOr<Measurement> MeasurePageableCopy(int ordinal,
                                                              size_t bytes,
                                                              int batches,
                                                              int warmup);

struct NaiveLoaderOptions {
  int ordinal = 0;
  int batches = 100;        // timed batches
  int warmup = 3;           // untimed batches first
  int collate_threads = 1;  // threads collating one batch (oneTBB arena)
  uint64_t seed = 0;        // shuffles the indices every epoch
  // W3 (the GEMMs) or w2w (the widening): runs after each batch's copy, on
  // the batch's device buffer; borrowed.
  ConsumerStep* step = nullptr;
  void* stream = nullptr;  // cudaStream_t the copies (and step) go on
};

// The naive loader, one batch at a time: collate the batch (shuffled
// indices, dataset Read into `layout`) into freshly malloc'd pageable
// memory, cudaHostAlloc a page-locked buffer, memcpy into it,
// cudaMemcpyAsync to a device buffer, synchronize, free both host buffers.
// The device buffer is allocated once. With a step, the step (GEMMs or
// widening) is queued after the synchronize, so the host work of the next
// batch overlaps it (and the next copy, on the same stream, waits for it).
[[nodiscard]] absl::StatusOr<Measurement> MeasureNaiveLoader(
    const Dataset& dataset, const BatchLayout& layout,
    const NaiveLoaderOptions& options);

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_CUDA_ROWS_H_
