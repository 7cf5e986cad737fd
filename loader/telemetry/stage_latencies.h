// StageLatencies: the latency distributions LoaderStats::latency reports,
// one per stage of a batch's way to the consumer, and the recorder the
// pipeline's hooks write them into (a LatencyHistogram per stage).
//
// A batch's way, and where each is timed:
//   slot_wait      a worker waiting for a free pinned slot (Producer)
//   read           one worker filling one batch: the user's Read calls for
//                  its samples, or the stream's Next (Producer)
//   copy           the device stage writing one batch: copy, gather or
//                  transform, the host time to issue it (TransferStage)
//   ready_wait     a written batch waiting for the consumer to take it
//   consumer_wait  the consumer blocked in Next() for a batch
//   data_wait      the part of that wait that is the data's: consumer_wait
//                  less the wait behind device buffers the consumer's own
//                  GPU work still holds (Note [a wait behind the consumer's
//                  buffers] in transfer/transfer_stage.cc)
//   step           the consumer's own time between two Next() calls of an
//                  epoch (the training step as the loader sees it)
#ifndef PINWHEEL_LOADER_TELEMETRY_STAGE_LATENCIES_H_
#define PINWHEEL_LOADER_TELEMETRY_STAGE_LATENCIES_H_

#include "absl/strings/string_view.h"

#include "loader/telemetry/latency_histogram.h"

namespace pinwheel {

// One stage: since Build() and over the last LatencyHistogram::kRecent
// batches. A value; thread-compatible.
struct StageLatency {
  LatencySummary total;
  LatencySummary recent;
};

// A value; thread-compatible.
struct StageLatencies {
  StageLatency slot_wait;
  StageLatency read;
  StageLatency copy;
  StageLatency ready_wait;
  StageLatency consumer_wait;
  StageLatency data_wait;
  StageLatency step;

  // Calls f(name, stage) for each, in a batch's order ("slot_wait", "read",
  // "copy", "ready_wait", "consumer_wait", "data_wait", "step").
  template <typename F>
  void ForEach(F&& f) const {
    f(absl::string_view("slot_wait"), slot_wait);
    f(absl::string_view("read"), read);
    f(absl::string_view("copy"), copy);
    f(absl::string_view("ready_wait"), ready_wait);
    f(absl::string_view("consumer_wait"), consumer_wait);
    f(absl::string_view("data_wait"), data_wait);
    f(absl::string_view("step"), step);
  }
};

// Thread-safe: each histogram is (see LatencyHistogram).
struct LatencyRecorder {
  LatencyHistogram slot_wait, read, copy, ready_wait, consumer_wait, data_wait,
      step;

  StageLatencies Snapshot() const {
    auto of = [](const LatencyHistogram& h) {
      return StageLatency{.total = h.Summary(), .recent = h.Recent()};
    };
    return {.slot_wait = of(slot_wait),
            .read = of(read),
            .copy = of(copy),
            .ready_wait = of(ready_wait),
            .consumer_wait = of(consumer_wait),
            .data_wait = of(data_wait),
            .step = of(step)};
  }
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_TELEMETRY_STAGE_LATENCIES_H_
