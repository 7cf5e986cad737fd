#include "loader/pipeline/batch_filler.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "oneapi/tbb/blocked_range.h"
#include "oneapi/tbb/parallel_for.h"
#include "oneapi/tbb/task_arena.h"

#include "loader/internal/random.h"
#include "pinning/base/mutex.h"
#include "pinning/base/status_macros.h"

namespace pinwheel::internal {
namespace {

constexpr int kReplaceAttempts = 8;
constexpr uint64_t kReplaceKey = 0x7265706c61636521ULL;  // "replace!"

std::string BatchName(int64_t position, int64_t batch, int64_t epoch) {
  return absl::StrCat("sample ", position, " of batch ", batch, ", epoch ",
                      epoch);
}

}  // namespace

BatchFiller::BatchFiller(const BatchLayout& layout,
                         const LoaderOptions& options, bool inline_mode,
                         WorkerInit& worker_init, const StopFlag& stop)
    : layout_(layout),
      batch_size_(options.batch_size),
      seed_(options.seed),
      on_error_(options.on_error),
      drop_last_(options.drop_last),
      inline_(inline_mode),
      worker_init_(worker_init),
      stop_(stop),
      reads_(worker_init.workers()),
      pad_(options.pad_last_batch) {
  if (pad_) {
    // LoaderCore appends the validity field after the dataset's fields.
    std::vector<FieldSpec> fields = layout_.sample().fields();
    fields.pop_back();
    absl::StatusOr<SampleLayout> read = SampleLayout::Create(std::move(fields));
    // A prefix of a valid layout is valid, so this always holds.
    if (read.ok()) read_sample_ = *std::move(read);
  }
}

std::string BatchFiller::last_replaced() const {
  MutexLock lock(&replaced_mu_);
  return last_replaced_;
}

void BatchFiller::PrepareView(SampleView& view) const {
  const SampleLayout& sample = layout_.sample();
  for (int f = 0; f < sample.num_fields(); ++f) {
    const FieldSpec& spec = sample.fields()[f];
    if (spec.variable_length) view.set_length(f, spec.shape[0]);
  }
}

absl::Status BatchFiller::FinishView(SampleView& view) const {
  PINWHEEL_RETURN_IF_ERROR(view.status());
  const SampleLayout& sample = layout_.sample();
  for (int f = 0; f < sample.num_fields(); ++f) {
    const FieldSpec& spec = sample.fields()[f];
    if (!spec.variable_length) continue;
    const int64_t length = view.length(f);
    if (length < 0 || length > spec.shape[0]) {
      return absl::OutOfRangeError(
          absl::StrCat("length ", length, " set for field '", spec.name,
                       "' is outside 0..", spec.shape[0]));
    }
    // Zero the padding: the slot holds an older batch's bytes.
    const size_t row = spec.bytes() / static_cast<size_t>(spec.shape[0]);
    absl::Span<std::byte> bytes = view.field(f);
    std::memset(bytes.data() + row * static_cast<size_t>(length), 0,
                bytes.size() - row * static_cast<size_t>(length));
  }
  return absl::OkStatus();
}

// Note [gated reads claim chunks inside the gate]
// Under kAuto a batch's chunks were read by the same parallel_for as by
// hand, each chunk passing the WorkerGate: a TBB thread claimed a chunk,
// then parked in Enter() holding it, so up to (threads - active) chunks of
// the batches in flight sat claimed and unread while the active threads
// ran out of work, and every chunk paid a pass through the gate. Auto ended
// at the configuration of a good manual row and ran slower than it: on one
// H200 (2026-11-28) W1 at 8 workers x 2 slots, 1,109 batches/s under auto
// against 1,347 by hand; W3 at 3 x 2, 278 against 296-302 for 2 or 4
// workers by hand. So a batch is now read by at most `active` lanes, each
// of which takes the gate once and then claims chunks from a shared count
// until none is left: a parked lane holds no chunk, and a lane that finds
// the batch done gives way without reading.
void BatchFiller::FillIndexed(const Dataset& dataset, ProducedBatch& batch) {
  BatchInfo& info = batch.info;
  const int64_t n = static_cast<int64_t>(info.sample_indices.size());
  info.samples = n;
  std::vector<absl::Status> failures(static_cast<size_t>(n));
  std::atomic<bool> abandoned{false};
  std::atomic<bool> init_failed{false};
  auto read_range = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      if (stop_.stopping()) {
        abandoned.store(true, std::memory_order_relaxed);
        return;
      }
      if (!worker_init_.EnsureRan().ok()) {
        init_failed.store(true, std::memory_order_relaxed);
        return;
      }
      const int64_t index = info.sample_indices[p];
      SampleView view(
          layout_, batch.slot.data, p, index,
          SampleRandom(seed_, info.epoch, static_cast<uint64_t>(index)),
          ReadLayout());
      PrepareView(view);
      const int worker = worker_init_.WorkerNumber();
      reads_.Begin(worker,
                   {.epoch = info.epoch, .batch = info.index, .index = index});
      absl::Status status =
          CallUser("Read", [&] { return dataset.Read(index, view); });
      reads_.End(worker);
      if (!view.status().ok()) {
        status = view.status();  // a misuse of the view is the first fault
      } else if (status.ok()) {
        status = FinishView(view);
      }
      failures[p] = std::move(status);
    }
  };
  // Under an auto-tuned worker count each run of reads holds the gate: at
  // most its `active` threads read at once (a run holds it only while it
  // reads, never while it waits for others, so this cannot deadlock).
  auto gated_range = [&](int64_t begin, int64_t end) {
    if (gate_ == nullptr) {
      read_range(begin, end);
      return;
    }
    const WorkerGate::Ticket ticket = gate_->Enter();
    read_range(begin, end);
    gate_->Exit(ticket);
  };
  const size_t sample_bytes =
      std::max<size_t>(1, layout_.sample().sample_bytes());
  const int64_t grain =
      std::max<int64_t>(1, static_cast<int64_t>((256 << 10) / sample_bytes));
  if (!inline_ && n > grain) {
    // A nested, isolated parallel_for over the samples keeps every worker
    // busy when there are fewer slots than workers; isolated, so a thread
    // waiting for it never picks up a first-stage task (which may block on
    // the ring while holding up the very batch the ring waits for). The
    // chunks run on other threads: see Note [ThreadSanitizer and the system
    // libraries].
    TsanRelease(&failures);
    tbb::this_task_arena::isolate([&] {
      if (gate_ == nullptr) {
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                          [&](const tbb::blocked_range<int64_t>& r) {
                            TsanAcquire(&failures);
                            read_range(r.begin(), r.end());
                            TsanRelease(&failures);
                          });
        return;
      }
      // Under the gate the chunks are claimed by lanes that hold it (Note
      // [gated reads claim chunks inside the gate]).
      const int64_t chunks = (n + grain - 1) / grain;
      const int lanes =
          static_cast<int>(std::min<int64_t>(chunks, gate_->active()));
      std::atomic<int64_t> next{0};
      tbb::parallel_for(
          tbb::blocked_range<int>(0, lanes, 1),
          [&](const tbb::blocked_range<int>&) {
            TsanAcquire(&failures);
            if (next.load(std::memory_order_relaxed) < chunks) {
              const WorkerGate::Ticket ticket = gate_->Enter();
              for (int64_t c = next.fetch_add(1); c < chunks;
                   c = next.fetch_add(1)) {
                read_range(c * grain, std::min(n, (c + 1) * grain));
              }
              gate_->Exit(ticket);
            }
            TsanRelease(&failures);
          },
          tbb::simple_partitioner());
    });
    TsanAcquire(&failures);
  } else {
    gated_range(0, n);
  }
  if (init_failed.load(std::memory_order_relaxed)) {
    batch.status = worker_init_.error();
    return;
  }
  if (abandoned.load(std::memory_order_relaxed)) {
    batch.abandoned = true;
    return;
  }
  int64_t failed = 0;
  for (const absl::Status& s : failures) failed += s.ok() ? 0 : 1;
  if (failed > 0 && on_error_ == ErrorPolicy::kReplace) {
    Replace(dataset, batch, failures);
    if (!batch.status.ok() || batch.abandoned) return;
    failed = 0;
  }
  if (failed == 0) {
    if (pad_) Pad(batch);
    return;
  }
  if (on_error_ == ErrorPolicy::kStop) {
    for (int64_t p = 0; p < n; ++p) {
      if (failures[p].ok()) continue;
      batch.status = absl::Status(
          failures[p].code(),
          absl::StrCat("dataset Read failed for index ", info.sample_indices[p],
                       " (", BatchName(p, info.index, info.epoch),
                       "): ", failures[p].message()));
      return;
    }
  }
  Compact(batch, failures);
  samples_skipped_.fetch_add(failed, std::memory_order_relaxed);
  if (pad_) Pad(batch);
}

void BatchFiller::Replace(const Dataset& dataset, ProducedBatch& batch,
                          std::vector<absl::Status>& failures) {
  // Note: serial, on the worker that filled the batch; failures are rare.
  BatchInfo& info = batch.info;
  const int64_t size = dataset.size();
  for (size_t p = 0; p < failures.size(); ++p) {
    if (failures[p].ok()) continue;
    const int64_t original = info.sample_indices[p];
    // The replacements of (seed, epoch, original): a pure function.
    internal::SplitMix64Stream draws(internal::Mix64(
        seed_ ^ kReplaceKey ^
        internal::SplitMix64(static_cast<uint64_t>(info.epoch)) ^
        internal::SplitMix64(static_cast<uint64_t>(original) + 1)));
    absl::Status last = failures[p];
    for (int attempt = 0; attempt < kReplaceAttempts; ++attempt) {
      if (stop_.stopping()) {
        batch.abandoned = true;
        return;
      }
      const auto index = static_cast<int64_t>(
          draws.Bounded(static_cast<uint64_t>(std::max<int64_t>(size, 1))));
      SampleView view(
          layout_, batch.slot.data, static_cast<int64_t>(p), index,
          SampleRandom(seed_, info.epoch, static_cast<uint64_t>(index)),
          ReadLayout());
      PrepareView(view);
      absl::Status status =
          CallUser("Read", [&] { return dataset.Read(index, view); });
      if (!view.status().ok()) {
        status = view.status();
      } else if (status.ok()) {
        status = FinishView(view);
      }
      if (status.ok()) {
        {
          MutexLock lock(&replaced_mu_);
          last_replaced_ = absl::StrCat(
              "index ", original, " (",
              BatchName(static_cast<int64_t>(p), info.index, info.epoch),
              ") replaced by index ", index, ": ", failures[p].message());
        }
        samples_replaced_.fetch_add(1, std::memory_order_relaxed);
        info.sample_indices[p] = index;
        failures[p] = absl::OkStatus();
        break;
      }
      last = std::move(status);
    }
    if (!failures[p].ok()) {
      batch.status = absl::Status(
          failures[p].code(),
          absl::StrCat(
              "dataset Read failed for index ", original, " (",
              BatchName(static_cast<int64_t>(p), info.index, info.epoch),
              "): ", failures[p].message(), "; and each of ", kReplaceAttempts,
              " replacements (ErrorPolicy::kReplace) failed, the "
              "last with: ",
              last.message()));
      return;
    }
  }
}

void BatchFiller::Pad(ProducedBatch& batch) const {
  BatchInfo& info = batch.info;
  const int64_t n = info.samples;
  if (n == 0) return;  // a batch of nothing is not delivered
  // The validity field is the sample's last (LoaderCore appends it).
  const int valid = layout_.sample().num_fields() - 1;
  std::byte* mask = batch.slot.data + layout_.field_offset(valid);
  std::memset(mask, 1, static_cast<size_t>(n));
  if (n == batch_size_) return;
  for (int f = 0; f < layout_.num_fields(); ++f) {
    const size_t bytes = layout_.fields()[f].bytes();
    std::memset(batch.slot.data + layout_.field_offset(f) +
                    bytes * static_cast<size_t>(n),
                0, bytes * static_cast<size_t>(batch_size_ - n));
  }
  info.sample_indices.resize(static_cast<size_t>(batch_size_), -1);
  info.padded = batch_size_ - n;
  info.samples = batch_size_;
}

void BatchFiller::MoveSample(ProducedBatch& batch, int64_t from,
                             int64_t to) const {
  for (int f = 0; f < layout_.num_fields(); ++f) {
    const size_t bytes = layout_.fields()[f].bytes();
    std::byte* base = batch.slot.data + layout_.field_offset(f);
    std::memmove(base + bytes * static_cast<size_t>(to),
                 base + bytes * static_cast<size_t>(from), bytes);
  }
}

void BatchFiller::Compact(ProducedBatch& batch,
                          const std::vector<absl::Status>& failures) const {
  // kSkipSample: move the good samples down, field by field.
  BatchInfo& info = batch.info;
  const int64_t n = static_cast<int64_t>(failures.size());
  int64_t kept = 0;
  std::vector<int64_t> kept_indices;
  for (int64_t p = 0; p < n; ++p) {
    if (!failures[p].ok()) continue;
    if (kept != p) MoveSample(batch, p, kept);
    kept_indices.push_back(info.sample_indices[p]);
    ++kept;
  }
  info.sample_indices = std::move(kept_indices);
  info.samples = kept;
}

}  // namespace pinwheel::internal
