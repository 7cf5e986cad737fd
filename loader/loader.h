// Loader: the pipeline of one dataset. Workers read samples straight into a
// ring of pinned slots; a transfer stage copies each batch to the device on
// its own stream; Next() hands the consumer a DeviceBatch and its ready
// event. Built by LoaderBuilder.
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(Loader loader,
//       LoaderBuilder(dataset).batch_size(256).shuffle(7).num_workers(8)
//           .Build());
//   Stream compute = Stream::Borrow(loader.device(), my_cuda_stream);
//   for (int epoch = 0; epoch < 10; ++epoch) {
//     while (true) {
//       PINWHEEL_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch,
//                                 loader.Next());
//       if (!batch) break;  // end of the epoch
//       PINWHEEL_RETURN_IF_ERROR(batch->WaitOn(compute));
//       Train(*batch, my_cuda_stream);
//       PINWHEEL_RETURN_IF_ERROR(batch->Release(compute));
//     }
//   }
//
// or, one epoch as a range:
//   for (absl::StatusOr<DeviceBatch>& batch : loader) { ... }
//
// Epochs run back to back: while the consumer works on the end of epoch e,
// workers already read epoch e+1 (never further: an epoch that turns out
// empty costs nothing while the consumer is away).
#ifndef PINWHEEL_LOADER_LOADER_H_
#define PINWHEEL_LOADER_LOADER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loader/loader_checkpoint.h"
#include "loader/loader_stats.h"
#include "transfer/device.h"
#include "transfer/device_batch.h"
#include "transfer/sample_layout.h"

namespace pinwheel {

class LoaderBuilder;
namespace internal {
class LoaderCore;
class StatsReporter;
}  // namespace internal

// Not thread-safe: one consumer thread calls Next(). A Next(), StartEpoch()
// or Checkpoint() called while one of them runs on another thread returns
// FailedPrecondition at once ("Next() called from two threads at once; a
// Loader has one consumer thread"), never a hang; the call already running
// is unaffected. (Only overlapping calls are detected: calls from several
// threads need the caller's own synchronization.) Move-only. Destroying
// it (or Shutdown()) stops and joins every thread, within a bound even when
// a Read never returns (see Shutdown()); DeviceBatches still held stay
// valid until released.
//
// A moved-from Loader holds nothing: Next() and StartEpoch() return
// FailedPrecondition, a range over it yields that error once, epoch() and
// batches_per_epoch() return -1, layout() and input_layout() an empty
// BatchLayout, device() the host, stats() zeros, and Shutdown() does
// nothing.
class Loader {
 public:
  // The last epoch: StartEpoch() takes 0..kMaxEpoch, and after epoch
  // kMaxEpoch Next() returns OutOfRange (epochs never overflow).
  static constexpr int64_t kMaxEpoch = int64_t{1} << 62;

  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;
  ~Loader();

  // Returns the next batch of the current epoch, or nullopt at its end (the
  // next call starts the following epoch). An epoch that turns out to have
  // no batch at run time (every shard of an IterableDataset empty, or too
  // short under drop_last; every sample skipped under kSkipSample) is not an
  // error: Next() returns nullopt at once, once per such epoch. (An epoch
  // that can never hold a batch is refused by Build().) Errors: a failed
  // Read (naming index, batch and epoch), DeadlineExceeded after the
  // timeout, FailedPrecondition when every device buffer is held by the
  // consumer or after a failed StartEpoch(), OutOfRange past kMaxEpoch,
  // Cancelled after Shutdown().
  [[nodiscard]] absl::StatusOr<std::optional<DeviceBatch>> Next();

  // Makes `epoch` the next one Next() reads from its first batch; the rest
  // of the current epoch is dropped. OK and nothing else when `epoch` is
  // already next and untouched. InvalidArgument unless 0 <= epoch <=
  // kMaxEpoch (nothing changes). FailedPrecondition when the consumer holds
  // every device buffer: the loader is then stopped, Next() returns
  // FailedPrecondition, and StartEpoch() may be called again once a batch
  // is released.
  [[nodiscard]] absl::Status StartEpoch(int64_t epoch);
  // Returns the epoch Next() reads from.
  int64_t epoch() const;
  int64_t batches_per_epoch() const;
  // Returns the layout of what each DeviceBatch carries: batch.field(i) is
  // layout().fields()[i] (name, dtype, per-sample shape after the batch
  // dimension), and layout().sample().FieldIndex(name) its index. With a
  // device transform: its output fields, then the input fields it keeps
  // (see Note [the delivered layout] in
  // transfer/device_stage/transform_writer.cc); its
  // field offsets then describe a packed slot, not where the fields lie:
  // use DeviceBatch::field(i).data.
  const BatchLayout& layout() const;
  // Returns the layout of the batches before the device transform: the
  // dataset's fields (and pad_last_batch's mask) as Read() writes them and
  // the transform's OutputLayout() is given them. Equal to layout() without
  // a device transform.
  const BatchLayout& input_layout() const;
  const Device& device() const;
  LoaderStats stats() const;

  // Returns where the consumer stands: the next Next() after resuming from
  // it (LoaderBuilder::resume) returns the batch the next Next() here would
  // have. Take it between Next() calls, once the batches delivered so far
  // are used: batches read ahead are read again after resume. O(1) bytes
  // and time. FailedPrecondition when in_order is false, or when an
  // IterableDataset's streams lack SaveState()/RestoreState(). See
  // Note [exact resume] in loader/loader_checkpoint.h.
  [[nodiscard]] absl::StatusOr<LoaderCheckpoint> Checkpoint() const;

  // Stops reading and copying and joins every thread, waiting at most
  // LoaderOptions::shutdown_timeout for the reads running. A read still
  // running then is abandoned, not interrupted: its thread is left to finish
  // on its own and keeps what it touches (the dataset, the pinned slot it
  // writes, the ring) alive until it returns, then frees it; Shutdown()
  // returns, writes one line to stderr naming each such read, and
  // shutdown_status() says so. Idempotent; the destructor calls it.
  void Shutdown();
  // Returns OK, or after a Shutdown() that abandoned reads DeadlineExceeded
  // naming each (index, batch, epoch, worker).
  [[nodiscard]] absl::Status shutdown_status() const;
  // Returns OK, or the first failure of LoaderOptions::stats_report's
  // callback (an error it returned, an exception) or file (a failed write),
  // which stopped the reports. Thread-safe.
  [[nodiscard]] absl::Status stats_report_status() const;

  // One epoch as a range of absl::StatusOr<DeviceBatch>; an error is the
  // last item. Advancing the range releases the batch it yielded (with
  // DeviceBatch::Release(): on the stream it last waited on, see Note
  // [release fences reuse]) before fetching the next, so it works with
  // device_buffers(1); move the batch out of the range to keep it longer.
  // A failed release is yielded as the last item.
  class Iterator;
  struct Sentinel {};
  Iterator begin();
  Sentinel end() { return {}; }

 private:
  friend class LoaderBuilder;  // the only maker of loaders
  explicit Loader(std::unique_ptr<internal::LoaderCore> core);

  std::unique_ptr<internal::LoaderCore> core_;
  // Set once by Build(), reported by stats() (see LoaderStats::cpu_budget).
  CpuBudget cpu_budget_;
  int num_workers_ = 0;
  std::string cpu_warning_;
  // LoaderOptions::stats_report's thread, or null; stopped (with a last
  // report) before core_ goes.
  std::unique_ptr<internal::StatsReporter> reporter_;
  absl::Status reporter_status_;  // reporter_'s status once stopped
  // Stops reporter_ with a last report of core_'s stats.
  void StopReporter();
};

class Loader::Iterator {
 public:
  using value_type = absl::StatusOr<DeviceBatch>;
  explicit Iterator(Loader* loader) : loader_(loader) { Advance(); }
  value_type& operator*() { return current_; }
  Iterator& operator++() {
    Advance();
    return *this;
  }
  bool operator==(Sentinel) const { return done_; }

 private:
  void Advance();
  Loader* loader_;
  value_type current_ = absl::UnknownError("no batch yet");
  bool done_ = false;
  bool failed_ = false;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_LOADER_H_
