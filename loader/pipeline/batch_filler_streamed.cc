// BatchFiller's streamed half: a shard's batch read from its SampleStream
// by the worker that claimed it, the samples' deferred finishes run by any
// worker (Note [a streamed sample finished elsewhere] in
// loader/iterable_dataset.h).
#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneapi/tbb/task_arena.h"
#include "oneapi/tbb/task_group.h"

#include "loader/internal/random.h"
#include "loader/pipeline/batch_filler.h"
#include "pinning/base/mutex.h"

namespace pinwheel::internal {

using FinishResult = SampleStream::FinishResult;

// One sample read with its finish still to run.
struct BatchFiller::Deferred {
  int64_t position;  // in the slot
  SampleView view;
  SampleStream::SampleFinish finish;
  absl::StatusOr<FinishResult> result =
      absl::CancelledError("the finish did not run");
};

// One FillStreamed() call. The reader owns it; the finish tasks write only
// their own Deferred and the two flags.
struct BatchFiller::StreamedRun {
  uint64_t stream_key = 0;
  int64_t filled = 0;   // samples in the slot, at positions 0..filled-1
  int64_t ordinal = 0;  // samples read this batch: keys their generators
  bool done = false;    // the stream is exhausted or failed
  // The first failure, by position (a finish's may come before a read's).
  int64_t failed_at = -1;
  absl::Status failure;
  std::vector<Deferred> deferred;  // this round's, in position order
  std::optional<tbb::task_group> tasks;
  std::atomic<bool> abandoned{false};
  std::atomic<bool> init_failed{false};

  void Fail(int64_t position, absl::Status status) {
    if (failed_at >= 0 && failed_at <= position) return;
    failed_at = position;
    failure = std::move(status);
  }
};

// One finish as a oneTBB task. The task reads what the reader wrote into
// its Deferred and the slot, handed over through oneTBB's queue, which
// ThreadSanitizer cannot see (Note [ThreadSanitizer and the system
// libraries]): the reader releases the Deferred before it runs the task and
// the task acquires it first. The reads before that (the task's own four
// pointers, written by oneTBB's run() on the reader, and oneTBB's
// bookkeeping in task_group.h) are suppressed in tests/tsan.supp.
struct BatchFiller::FinishTask {
  BatchFiller* filler;
  Deferred* d;
  const ProducedBatch* batch;
  StreamedRun* run;

  void operator()() const {
    TsanAcquire(d);
    filler->RunFinish(*d, *batch, *run);
    TsanRelease(d);
  }
};

bool BatchFiller::FillStreamed(SampleStream& stream, ProducedBatch& batch,
                               uint64_t stream_key) {
  BatchInfo& info = batch.info;
  StreamedRun run;
  run.stream_key = stream_key;
  run.deferred.reserve(static_cast<size_t>(batch_size_));
  absl::Status init = worker_init_.EnsureRan();
  if (!init.ok()) {
    batch.status = std::move(init);
    run.done = true;
  } else {
    // Isolated: while this thread waits for its finishes it runs only
    // them, never a first-stage task that may block on the ring (as in
    // FillIndexed()).
    tbb::this_task_arena::isolate([&] {
      for (;;) {
        ReadRound(stream, batch, run);
        const int64_t skipped = FinishRound(batch, run);
        if (run.failed_at >= 0 || run.abandoned.load() ||
            run.init_failed.load() || run.done || skipped == 0) {
          break;
        }
      }
    });
  }
  if (run.init_failed.load()) {
    batch.status = worker_init_.error();
    run.done = true;
  } else if (run.failed_at >= 0) {
    batch.status = absl::Status(
        run.failure.code(),
        absl::StrCat("iterable dataset shard ", batch.shard, " failed at ",
                     "sample ", run.failed_at, " of batch ", info.index,
                     ", epoch ", info.epoch, ": ", run.failure.message()));
    run.done = true;
  }
  if (run.abandoned.load()) batch.abandoned = true;
  int64_t p = run.filled;
  // drop_last: each shard's last batch, when short, is dropped (a batch
  // holds samples of one shard only).
  if (batch.status.ok() && drop_last_ && p < batch_size_) p = 0;
  info.samples = p;
  info.sample_indices.assign(static_cast<size_t>(p), -1);
  if (pad_ && batch.status.ok() && !batch.abandoned) Pad(batch);
  if (batch.status.ok()) {
    batch.stream_state =
        CallUser("SampleStream::SaveState", [&] { return stream.SaveState(); });
  }
  return run.done;
}

void BatchFiller::ReadRound(SampleStream& stream, ProducedBatch& batch,
                            StreamedRun& run) {
  const BatchInfo& info = batch.info;
  // A shard's samples are read by one thread: it holds the gate while it
  // reads, not while it waits for the finishes.
  std::optional<WorkerGate::Ticket> ticket;
  if (gate_ != nullptr) ticket = gate_->Enter();
  for (int64_t p = run.filled; p < batch_size_; ++p) {
    if (stop_.stopping()) {
      run.abandoned.store(true);
      break;
    }
    SampleView view(layout_, batch.slot.data, p, -1,
                    SampleRandom(seed_, info.epoch,
                                 Mix64(run.stream_key +
                                       static_cast<uint64_t>(run.ordinal++))),
                    ReadLayout());
    PrepareView(view);
    SampleStream::SampleFinish finish;
    const int worker = worker_init_.WorkerNumber();
    reads_.Begin(
        worker,
        {.epoch = info.epoch, .batch = info.index, .shard = batch.shard});
    absl::StatusOr<bool> more = CallUser(
        "SampleStream::Next", [&] { return stream.NextOrDefer(view, finish); });
    reads_.End(worker);
    if (!view.status().ok()) {
      more = view.status();
    } else if (more.ok() && *more && !finish) {
      absl::Status finished = FinishView(view);
      if (!finished.ok()) more = std::move(finished);
    }
    if (!more.ok()) {
      run.Fail(p, more.status());
      run.done = true;
      break;
    }
    if (!*more) {
      run.done = true;
      break;
    }
    run.filled = p + 1;
    if (finish) {
      Deferred& d = run.deferred.emplace_back(
          Deferred{.position = p, .view = view, .finish = std::move(finish)});
      if (inline_) {
        RunFinish(d, batch, run);
      } else {
        if (!run.tasks.has_value()) run.tasks.emplace();
        TsanRelease(&d);
        run.tasks->run(FinishTask{this, &d, &batch, &run});
      }
    }
  }
  if (ticket.has_value()) gate_->Exit(*ticket);
}

void BatchFiller::RunFinish(Deferred& d, const ProducedBatch& batch,
                            StreamedRun& run) {
  if (stop_.stopping()) {
    run.abandoned.store(true);
    return;
  }
  if (!worker_init_.EnsureRan().ok()) {
    run.init_failed.store(true);
    return;
  }
  // Inline, the reader runs it while holding the gate itself.
  std::optional<WorkerGate::Ticket> ticket;
  if (gate_ != nullptr && !inline_) ticket = gate_->Enter();
  const int worker = worker_init_.WorkerNumber();
  reads_.Begin(worker, {.epoch = batch.info.epoch,
                        .batch = batch.info.index,
                        .shard = batch.shard,
                        .finish = true});
  d.result = CallUser("a SampleStream's SampleFinish",
                      [&] { return std::move(d.finish)(d.view); });
  reads_.End(worker);
  if (ticket.has_value()) gate_->Exit(*ticket);
  if (!d.result.ok() || *d.result == FinishResult::kSkipped) return;
  if (!d.view.status().ok()) {
    d.result = d.view.status();
    return;
  }
  absl::Status finished = FinishView(d.view);
  if (!finished.ok()) d.result = std::move(finished);
}

int64_t BatchFiller::FinishRound(ProducedBatch& batch, StreamedRun& run) {
  if (run.deferred.empty()) return 0;
  if (run.tasks.has_value()) {
    run.tasks->wait();
    for (const Deferred& d : run.deferred) TsanAcquire(&d);
  }
  std::vector<bool> skipped(static_cast<size_t>(run.filled), false);
  int64_t skips = 0;
  for (const Deferred& d : run.deferred) {
    if (!d.result.ok()) {
      // A stopped loader's unrun finishes are not failures.
      if (!run.abandoned.load() && !run.init_failed.load()) {
        run.Fail(d.position, d.result.status());
      }
    } else if (*d.result == FinishResult::kSkipped) {
      skipped[static_cast<size_t>(d.position)] = true;
      ++skips;
    }
  }
  run.deferred.clear();
  if (skips == 0 || run.failed_at >= 0) return skips;
  // Move the samples after each skipped one down over it; the next round reads
  // into the freed places at the end.
  int64_t kept = 0;
  for (int64_t p = 0; p < run.filled; ++p) {
    if (skipped[static_cast<size_t>(p)]) continue;
    if (kept != p) MoveSample(batch, p, kept);
    ++kept;
  }
  run.filled = kept;
  return skips;
}

}  // namespace pinwheel::internal
