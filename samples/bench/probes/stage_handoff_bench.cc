// stage_handoff_bench: the per-batch hand-off cost of TransferStage on the
// host backend, without workers or a dataset: one producer thread acquires a
// ring slot and submits it, the consumer takes each batch with Next() and
// drops it at once. With tiny batches (--elements=1) the copy itself is
// almost free, so batches/s measures the hand-offs (locks, wake-ups, thread
// switches) between producer, copy thread and consumer; --elements=1024
// gives W2's batch (32 x 2 x i64[1024]) with a memcpy on the host stream.
//
// Usage: stage_handoff_bench [--batches=N] [--elements=E] [--slots=S]
//                            [--buffers=B] [--repeat=R]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "pinning/pinned_ring.h"
#include "transfer/device.h"
#include "transfer/sample_layout.h"
#include "transfer/transfer_stage.h"

namespace pinwheel {
namespace {

int64_t Flag(int argc, char** argv, const char* name, int64_t fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::atoll(argv[i] + prefix.size());
    }
  }
  return fallback;
}

int Run(int argc, char** argv) {
  const int64_t batches = Flag(argc, argv, "batches", 100000);
  const int64_t elements = Flag(argc, argv, "elements", 1);
  const int slots = static_cast<int>(Flag(argc, argv, "slots", 8));
  const int buffers = static_cast<int>(Flag(argc, argv, "buffers", 2));
  const int repeat = static_cast<int>(Flag(argc, argv, "repeat", 5));
  absl::StatusOr<SampleLayout> sample = SampleLayout::Create({
      {.name = "input", .dtype = DType::kInt64, .shape = {elements}},
      {.name = "target", .dtype = DType::kInt64, .shape = {elements}},
  });
  if (!sample.ok())
    return std::fprintf(stderr, "%s\n", sample.status().ToString().c_str()), 1;
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create(*sample, 32);
  if (!layout.ok())
    return std::fprintf(stderr, "%s\n", layout.status().ToString().c_str()), 1;
  std::vector<double> rates;
  std::vector<double> cpu_per_batch;
  std::vector<double> blocks_per_batch;
  for (int r = 0; r < repeat; ++r) {
    absl::StatusOr<std::unique_ptr<PinnedRing>> ring =
        PinnedRing::Create({.slots = slots,
                            .slot_bytes = layout->slot_bytes(),
                            .memory = HostMemoryKind::kPageable});
    if (!ring.ok())
      return std::fprintf(stderr, "%s\n", ring.status().ToString().c_str()), 1;
    absl::StatusOr<std::unique_ptr<TransferStage>> stage =
        TransferStage::Create(Device::Host(), ring->get(), *layout, buffers);
    if (!stage.ok())
      return std::fprintf(stderr, "%s\n", stage.status().ToString().c_str()), 1;
    rusage before{};
    getrusage(RUSAGE_SELF, &before);
    const absl::Time start = absl::Now();
    std::thread producer([&] {
      for (int64_t b = 0; b < batches; ++b) {
        absl::StatusOr<PinnedRing::Slot> slot = (*ring)->Acquire();
        if (!slot.ok()) return;
        (*stage)->Submit({.kind = FilledBatch::Kind::kBatch,
                          .info = {.index = b, .samples = 32},
                          .slot = slot->index});
      }
    });
    int64_t got = 0;
    for (; got < batches; ++got) {
      absl::StatusOr<TransferStage::Delivery> d =
          (*stage)->Next(absl::Now() + absl::Seconds(30));
      if (!d.ok() || d->info().index != got) {
        std::fprintf(stderr, "batch %lld: %s\n", static_cast<long long>(got),
                     d.ok() ? "out of order" : d.status().ToString().c_str());
        std::abort();
      }
    }
    const double secs = absl::ToDoubleSeconds(absl::Now() - start);
    producer.join();
    rusage after{};
    getrusage(RUSAGE_SELF, &after);
    auto micros = [](const timeval& t) { return t.tv_sec * 1e6 + t.tv_usec; };
    const double cpu_us = micros(after.ru_utime) + micros(after.ru_stime) -
                          micros(before.ru_utime) - micros(before.ru_stime);
    // Voluntary context switches: a thread blocking (to be woken later).
    const double blocks = static_cast<double>(after.ru_nvcsw - before.ru_nvcsw);
    cpu_per_batch.push_back(cpu_us / static_cast<double>(batches));
    blocks_per_batch.push_back(blocks / static_cast<double>(batches));
    const TransferStats stats = (*stage)->stats();
    rates.push_back(static_cast<double>(batches) / secs);
    // Batches the submitter copied itself (-1: a TransferStage without it).
    const int64_t inline_copies = [](const auto& s) -> int64_t {
      if constexpr (requires { s.inline_copies; }) {
        return s.inline_copies;
      } else {
        return -1;
      }
    }(stats);
    std::printf(
        "rep %d: %.0f batches/s, copied by the submitter %lld of %lld, "
        "cpu %.1f us/b, %.2f blocking waits/b, copy idle %.1f us/b, "
        "issue %.1f us/b\n",
        r + 1, rates.back(), static_cast<long long>(inline_copies),
        static_cast<long long>(stats.batches_copied), cpu_per_batch.back(),
        blocks_per_batch.back(),
        absl::ToDoubleMicroseconds(stats.idle_time) / batches,
        absl::ToDoubleMicroseconds(stats.issue_time) / batches);
    (*stage)->Shutdown();
  }
  std::sort(rates.begin(), rates.end());
  std::sort(cpu_per_batch.begin(), cpu_per_batch.end());
  std::sort(blocks_per_batch.begin(), blocks_per_batch.end());
  std::printf(
      "elements=%lld slots=%d buffers=%d batches=%lld: median %.0f "
      "batches/s [%.0f-%.0f], cpu %.1f us/b, %.2f blocking waits/b\n",
      static_cast<long long>(elements), slots, buffers,
      static_cast<long long>(batches), rates[rates.size() / 2], rates.front(),
      rates.back(), cpu_per_batch[rates.size() / 2],
      blocks_per_batch[rates.size() / 2]);
  return 0;
}

}  // namespace
}  // namespace pinwheel

int main(int argc, char** argv) { return pinwheel::Run(argc, argv); }
