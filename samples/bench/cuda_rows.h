// The rows of the benchmark that talk to CUDA directly rather than through
// pinwheel: the raw pinned copy limit, a pageable cudaMemcpy, the naive
// loader (what DataLoader(pin_memory=True) does), and W3's fixed compute
// step (two bf16 GEMMs with cuBLAS). In a build without the cuda backend
// every function here returns FailedPrecondition and the caller skips the
// row with a note.
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

// W3's compute step: C = A·B then D = C·B, bf16 n×n matrices, fp32
// accumulation (cublasGemmEx, CUDA_R_16BF, CUBLAS_COMPUTE_32F). Owns its
// cuBLAS handle and 4 device matrices. Not thread-safe.
class GemmStep {
 public:
  // Allocates and fills the matrices on device `ordinal`.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GemmStep>> Create(
      int ordinal, int n);
  GemmStep(const GemmStep&) = delete;
  GemmStep& operator=(const GemmStep&) = delete;
  ~GemmStep();

  // Queues the two GEMMs on `stream` (a cudaStream_t) and returns at once.
  [[nodiscard]] absl::Status Enqueue(void* stream);
  // Returns the milliseconds of one step alone: `steps` steps queued back to
  // back on `stream` after `warmup` untimed ones, timed with cuda events.
  [[nodiscard]] absl::StatusOr<double> TimeAloneMs(void* stream, int steps,
                                                   int warmup);
  size_t device_bytes() const;

  struct Impl;

 private:
  explicit GemmStep(std::unique_ptr<Impl> impl);
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
  int batches = 100;         // timed batches
  int warmup = 3;            // untimed batches first
  int collate_threads = 1;   // threads collating one batch (oneTBB arena)
  uint64_t seed = 0;         // shuffles the indices every epoch
  GemmStep* step = nullptr;  // W3: runs after each batch's copy; borrowed
  void* stream = nullptr;    // cudaStream_t the copies (and step) go on
};

// The naive loader, one batch at a time: collate the batch (shuffled
// indices, dataset Read into `layout`) into freshly malloc'd pageable
// memory, cudaHostAlloc a page-locked buffer, memcpy into it,
// cudaMemcpyAsync to a device buffer, synchronize, free both host buffers.
// The device buffer is allocated once. With a step, the GEMMs are queued
// after the synchronize, so the host work of the next batch overlaps them
// (and the next copy, on the same stream, waits for them).
[[nodiscard]] absl::StatusOr<Measurement> MeasureNaiveLoader(
    const Dataset& dataset, const BatchLayout& layout,
    const NaiveLoaderOptions& options);

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_CUDA_ROWS_H_
