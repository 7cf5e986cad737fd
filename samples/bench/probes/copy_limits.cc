// copy_limits: what this machine allows a loader, measured without pinwheel.
// Issue 12 asks where W1's and W2's time goes; pinwheel_bench compares each
// row with a copy from ONE pinned buffer, which the DMA engine may read from
// the host's last-level cache. A loader instead copies buffers that worker
// threads have just written, while they keep writing the next ones. This
// probe measures, with the CUDA runtime and plain threads only:
//
//   copy hot        the reference: one pinned buffer copied again and again
//   copy ring R     copies rotating over R pinned slots nobody writes
//   copy + stream T the ring copy while T threads stream-copy other memory
//                   (memory bandwidth taken from the DMA engine)
//   fill T          T threads filling slots (the workload's own fill), no copy
//   ideal T R       the smallest loader that can exist: T threads fill R
//                   slots (atomics, spin), one thread copies them in order and
//                   frees a slot when cudaEventQuery says its copy is done;
//                   no locks, no queues, no consumer; the ceiling of any
//                   loader with this fill on this machine
//   memcpy T        host memory bandwidth: T threads copying 64 MiB blocks
//   pinwheel T R D  a pinwheel Loader (T workers, R slots, D device buffers)
//                   over a dataset whose Read is the same fill, one sample at
//                   a time; the consumer waits on and releases each batch on
//                   its own stream (as pinwheel_bench's W2 rows); "no fill"
//                   rows read nothing (the pipeline alone)
//
// Workloads: w2 (32 windows x 1024 tokens, u16 in memory widened into i64
// input and target: 0.5 MiB a batch) and w1 (256 images of 150,528 bytes from
// 308 MB in memory, plus an i64 label: 38.5 MB a batch). Every row is run
// --repeat times; the median and [min-max] are printed.
//
// Usage: copy_limits [--workloads=w2,w1] [--threads=1,4,8,14] [--repeat=3]
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <immintrin.h>
#include <memory>
#include <mutex>
#include <sched.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include "loader/dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "samples/bench/probes/check_cuda.h"
#include "transfer/device.h"
#include "transfer/stream.h"

ABSL_FLAG(std::string, workloads, "w2,w1", "w2 and/or w1");
ABSL_FLAG(std::string, threads, "1,4,8,14", "fill thread counts");
ABSL_FLAG(int, repeat, 3, "repetitions of every row");
ABSL_FLAG(double, seconds, 0.4, "about how long one repetition runs");
ABSL_FLAG(bool, blocking_sync, false,
          "cudaDeviceScheduleBlockingSync: threads waiting on the GPU sleep "
          "instead of spinning");
ABSL_FLAG(bool, cpu_clock, false,
          "pinwheel rows also count the thread CPU time inside Read (a "
          "clock_gettime(CLOCK_THREAD_CPUTIME_ID) pair a sample): CPU time "
          "below the wall time inside Read is time the thread was off the "
          "CPU");
ABSL_FLAG(bool, block_rows, false,
          "also the fill and smallest-pipeline rows with the slots carved "
          "out of one allocation (as pinwheel's ring) and one a slot");
ABSL_FLAG(bool, reference_rows, true,
          "false: only the hot copy and the pinwheel rows (and no memcpy "
          "bandwidth rows)");
ABSL_FLAG(std::string, pinwheel, "",
          "pinwheel rows, TxRxD[:nofill][:host][:fstat] comma-separated "
          "(default: per "
          "workload, see RunWorkload)");

namespace {

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void Relax(int& spins) {
  if (++spins < 256) {
    _mm_pause();
  } else {
    sched_yield();
  }
}

// Time spent inside Read(), per thread: each thread adds to its own
// counter (no shared cache line in the hot path); Sum() reads them all.
class ReadClock {
 public:
  static void Add(int64_t ns) {
    Mine().ns.fetch_add(ns, std::memory_order_relaxed);
  }
  static void AddCpu(int64_t ns) {
    Mine().cpu_ns.fetch_add(ns, std::memory_order_relaxed);
  }
  // Returns the nanoseconds counted so far and the threads that counted.
  static std::pair<int64_t, int> Sum() {
    std::lock_guard<std::mutex> lock(mu());
    int64_t total = 0;
    for (const auto& c : counters())
      total += c->ns.load(std::memory_order_relaxed);
    return {total, static_cast<int>(counters().size())};
  }
  // Returns the thread CPU nanoseconds counted so far (--cpu_clock).
  static int64_t SumCpu() {
    std::lock_guard<std::mutex> lock(mu());
    int64_t total = 0;
    for (const auto& c : counters())
      total += c->cpu_ns.load(std::memory_order_relaxed);
    return total;
  }

 private:
  struct alignas(128) Counter {
    std::atomic<int64_t> ns{0};
    std::atomic<int64_t> cpu_ns{0};
  };
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::unique_ptr<Counter>>& counters() {
    static std::vector<std::unique_ptr<Counter>> c;
    return c;
  }
  static Counter& Mine() {
    thread_local Counter* mine = [] {
      std::lock_guard<std::mutex> lock(mu());
      counters().push_back(std::make_unique<Counter>());
      return counters().back().get();
    }();
    return *mine;
  }
};

// A workload: how big a batch is and how a worker fills one.
struct Workload {
  std::string name;
  size_t batch_bytes = 0;
  std::vector<std::byte> source;  // what the fill reads
  void (*fill)(const Workload&, std::byte* slot, int64_t batch) = nullptr;
};

constexpr int kW2Batch = 32;
constexpr int kW2SeqLen = 1024;
constexpr int64_t kW2Tokens = 50'000'000;

// One W2 sample: the window at `key` widened into its input and target rows.
void FillW2Sample(const Workload& w, uint64_t key, int64_t* in,
                  int64_t* target) {
  const auto* tokens = reinterpret_cast<const uint16_t*>(w.source.data());
  const uint16_t* src = tokens + key % (kW2Tokens - kW2SeqLen - 1);
  for (int t = 0; t < kW2SeqLen; ++t) {
    in[t] = src[t];
    target[t] = src[t + 1];
  }
}

void FillW2(const Workload& w, std::byte* slot, int64_t batch) {
  auto* input = reinterpret_cast<int64_t*>(slot);
  int64_t* target = input + kW2Batch * kW2SeqLen;
  for (int s = 0; s < kW2Batch; ++s) {
    FillW2Sample(w, Mix(static_cast<uint64_t>(batch) * kW2Batch + s),
                 input + s * kW2SeqLen, target + s * kW2SeqLen);
  }
}

constexpr int kW1Batch = 256;
constexpr size_t kW1Image = 3 * 224 * 224;
constexpr int kW1Samples = 2048;

// One W1 sample: the image drawn by `key` and its label.
void FillW1Sample(const Workload& w, uint64_t key, std::byte* image,
                  int64_t* label) {
  const uint64_t sample = key % kW1Samples;
  std::memcpy(image, w.source.data() + sample * kW1Image, kW1Image);
  *label = static_cast<int64_t>(sample % 1000);
}

void FillW1(const Workload& w, std::byte* slot, int64_t batch) {
  auto* labels = reinterpret_cast<int64_t*>(slot + kW1Batch * kW1Image);
  for (int s = 0; s < kW1Batch; ++s) {
    FillW1Sample(w, Mix(static_cast<uint64_t>(batch) * kW1Batch + s),
                 slot + s * kW1Image, labels + s);
  }
}

Workload MakeWorkload(const std::string& name) {
  Workload w;
  w.name = name;
  if (name == "w2") {
    w.batch_bytes = 2ull * kW2Batch * kW2SeqLen * sizeof(int64_t);
    w.source.resize(kW2Tokens * sizeof(uint16_t));
    w.fill = FillW2;
  } else {
    w.batch_bytes = kW1Batch * kW1Image + kW1Batch * sizeof(int64_t);
    w.source.resize(kW1Samples * kW1Image);
    w.fill = FillW1;
  }
  // Random bytes, written by one thread (pages land where it runs, as in
  // the benchmark's datasets).
  uint64_t state = 1;
  for (size_t i = 0; i + 8 <= w.source.size(); i += 8) {
    const uint64_t v = Mix(state++) & 0x7fff7fff7fff7fffull;  // tokens < 2^15
    std::memcpy(w.source.data() + i, &v, 8);
  }
  return w;
}

// `count` pinned slots: one cudaHostAlloc each, or (one_block) slices of
// one allocation, as pinwheel's ring is.
struct PinnedSlots {
  std::vector<std::byte*> slots;
  std::vector<void*> allocations;
  PinnedSlots(int count, size_t bytes, bool one_block = false) {
    if (one_block) {
      void* p = nullptr;
      CHECK_CUDA(cudaHostAlloc(&p, bytes * count, cudaHostAllocPortable));
      std::memset(p, 0x5a, bytes * count);
      allocations.push_back(p);
      for (int i = 0; i < count; ++i)
        slots.push_back(static_cast<std::byte*>(p) + i * bytes);
      return;
    }
    for (int i = 0; i < count; ++i) {
      void* p = nullptr;
      CHECK_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
      std::memset(p, 0x5a, bytes);
      slots.push_back(static_cast<std::byte*>(p));
      allocations.push_back(p);
    }
  }
  ~PinnedSlots() {
    for (void* p : allocations) cudaFreeHost(p);
  }
};

struct DeviceSide {
  cudaStream_t stream = nullptr;
  std::vector<void*> buffers;
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  DeviceSide(int count, size_t bytes) {
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int i = 0; i < count; ++i) {
      void* p = nullptr;
      CHECK_CUDA(cudaMalloc(&p, bytes));
      buffers.push_back(p);
    }
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&end));
  }
  ~DeviceSide() {
    cudaStreamSynchronize(stream);
    for (void* p : buffers) cudaFree(p);
    cudaEventDestroy(start);
    cudaEventDestroy(end);
    cudaStreamDestroy(stream);
  }
};

// Copies `batches` batches, rotating over `slots`, event-timed; returns
// batches/s.
double CopyRate(const std::vector<std::byte*>& slots, size_t bytes,
                DeviceSide& dev, int64_t batches) {
  for (size_t i = 0; i < slots.size(); ++i) {  // warm up
    CHECK_CUDA(cudaMemcpyAsync(dev.buffers[i % dev.buffers.size()], slots[i],
                               bytes, cudaMemcpyHostToDevice, dev.stream));
  }
  CHECK_CUDA(cudaEventRecord(dev.start, dev.stream));
  for (int64_t k = 0; k < batches; ++k) {
    CHECK_CUDA(cudaMemcpyAsync(dev.buffers[k % dev.buffers.size()],
                               slots[k % slots.size()], bytes,
                               cudaMemcpyHostToDevice, dev.stream));
  }
  CHECK_CUDA(cudaEventRecord(dev.end, dev.stream));
  CHECK_CUDA(cudaEventSynchronize(dev.end));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, dev.start, dev.end));
  return static_cast<double>(batches) / (ms / 1e3);
}

// T threads copying 64 MiB blocks until `stop`; returns bytes copied.
class MemcpyLoad {
 public:
  explicit MemcpyLoad(int threads) : blocks_(threads) {
    for (auto& b : blocks_) b.assign(2 * kBlock, std::byte{1});
  }
  void Start() {
    stop_ = false;
    copied_ = 0;
    for (size_t t = 0; t < blocks_.size(); ++t) {
      threads_.emplace_back([this, t] {
        int64_t copied = 0;
        while (!stop_.load(std::memory_order_relaxed)) {
          std::memcpy(blocks_[t].data() + kBlock, blocks_[t].data(), kBlock);
          copied += kBlock;
        }
        copied_ += copied;
      });
    }
  }
  int64_t Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
    return copied_;
  }

 private:
  static constexpr size_t kBlock = 64 << 20;
  std::vector<std::vector<std::byte>> blocks_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> copied_{0};
};

// T threads filling batches into R slots, no copy; returns batches/s.
double FillRate(const Workload& w, PinnedSlots& ring, int threads,
                double seconds) {
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> finished{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  const double t0 = Now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        const int64_t k = next.fetch_add(1);
        const auto start = std::chrono::steady_clock::now();
        w.fill(w, ring.slots[k % ring.slots.size()], k);
        ReadClock::Add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count());
        finished.fetch_add(1);
      }
    });
  }
  const int64_t clock0 = ReadClock::Sum().first;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const int64_t done_at_stop = finished.load();
  stop = true;
  const double elapsed = Now() - t0;
  for (auto& t : pool) t.join();
  std::printf("    (fill x%d: %.2f us of thread time a batch)\n", threads,
              static_cast<double>(ReadClock::Sum().first - clock0) / 1e3 /
                  static_cast<double>(finished.load()));
  return static_cast<double>(done_at_stop) / elapsed;
}

// One thread fills a slot, copies it and records its event, then waits for
// the next slot's event: the fill interleaved with CUDA calls on the same
// thread. Returns batches/s; prints the thread time inside the fill.
double FillCopyRate(const Workload& w, PinnedSlots& ring, DeviceSide& dev,
                    int64_t batches) {
  const int slots = static_cast<int>(ring.slots.size());
  std::vector<cudaEvent_t> done(slots);
  for (cudaEvent_t& event : done) {
    CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  int64_t fill_ns = 0;
  double t0 = 0;
  for (int64_t k = 0; k < slots + batches; ++k) {
    if (k == slots) {
      CHECK_CUDA(cudaStreamSynchronize(dev.stream));
      fill_ns = 0;
      t0 = Now();
    }
    const int r = static_cast<int>(k % slots);
    CHECK_CUDA(cudaEventSynchronize(done[r]));
    const auto start = std::chrono::steady_clock::now();
    w.fill(w, ring.slots[r], k);
    fill_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count();
    CHECK_CUDA(cudaMemcpyAsync(dev.buffers[k % dev.buffers.size()],
                               ring.slots[r], w.batch_bytes,
                               cudaMemcpyHostToDevice, dev.stream));
    CHECK_CUDA(cudaEventRecord(done[r], dev.stream));
  }
  CHECK_CUDA(cudaStreamSynchronize(dev.stream));
  const double seconds = Now() - t0;
  for (cudaEvent_t e : done) cudaEventDestroy(e);
  std::printf(
      "    (fill+copy x1: %.2f us inside the fill a batch)\n",
      static_cast<double>(fill_ns) / 1e3 / static_cast<double>(batches));
  return static_cast<double>(batches) / seconds;
}

// The smallest loader (see the file comment); returns batches/s over
// `batches` batches after slots.size() warm-up batches.
double IdealRate(const Workload& w, PinnedSlots& ring, DeviceSide& dev,
                 int threads, int64_t batches, bool fill) {
  const int slots = static_cast<int>(ring.slots.size());
  const int64_t warmup = slots;
  const int64_t total = warmup + batches;
  std::vector<std::atomic<int64_t>> filled(slots);    // batch filled in slot
  std::vector<std::atomic<int64_t>> free_for(slots);  // batch allowed to fill
  std::vector<cudaEvent_t> done(slots);
  for (int r = 0; r < slots; ++r) {
    filled[r] = -1;
    free_for[r] = r;
    CHECK_CUDA(cudaEventCreateWithFlags(&done[r], cudaEventDisableTiming));
  }
  std::atomic<int64_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      while (true) {
        const int64_t k = next.fetch_add(1);
        if (k >= total) return;
        const int r = static_cast<int>(k % slots);
        int spins = 0;
        while (free_for[r].load(std::memory_order_acquire) != k) Relax(spins);
        if (fill) w.fill(w, ring.slots[r], k);
        filled[r].store(k, std::memory_order_release);
      }
    });
  }
  // The copier: in order; frees a slot once its copy's event has completed.
  std::vector<int64_t> pending;  // batches copied, in order, not yet freed
  size_t head = 0;
  double t0 = 0;
  auto reap = [&] {
    while (head < pending.size()) {
      const int64_t k = pending[head];
      const int r = static_cast<int>(k % slots);
      if (cudaEventQuery(done[r]) != cudaSuccess) break;
      free_for[r].store(k + slots, std::memory_order_release);
      ++head;
    }
  };
  for (int64_t k = 0; k < total; ++k) {
    const int r = static_cast<int>(k % slots);
    int spins = 0;
    while (filled[r].load(std::memory_order_acquire) != k) {
      reap();
      Relax(spins);
    }
    if (k == warmup) {
      CHECK_CUDA(cudaStreamSynchronize(dev.stream));
      t0 = Now();
    }
    CHECK_CUDA(cudaMemcpyAsync(dev.buffers[k % dev.buffers.size()],
                               ring.slots[r], w.batch_bytes,
                               cudaMemcpyHostToDevice, dev.stream));
    CHECK_CUDA(cudaEventRecord(done[r], dev.stream));
    pending.push_back(k);
    reap();
  }
  CHECK_CUDA(cudaStreamSynchronize(dev.stream));
  const double seconds = Now() - t0;
  cudaGetLastError();  // cudaErrorNotReady from the queries
  for (auto& t : pool) t.join();
  for (cudaEvent_t e : done) cudaEventDestroy(e);
  return static_cast<double>(batches) / seconds;
}

// Sample `index` of a workload, written through a SampleView: the same bytes
// the fill functions write for one sample.
class FillDataset final : public pinwheel::Dataset {
 public:
  // fstat_fd >= 0: Read() also calls fstat() on it, as the file-backed
  // datasets do to catch a file truncated under their mapping.
  FillDataset(const Workload& w, pinwheel::SampleLayout layout, int64_t size,
              bool fill, int fstat_fd)
      : w_(w),
        layout_(std::move(layout)),
        size_(size),
        fill_(fill),
        fstat_fd_(fstat_fd) {}
  int64_t size() const override { return size_; }
  const pinwheel::SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, pinwheel::SampleView& out) const override {
    if (fstat_fd_ >= 0) {
      struct stat info {};
      if (fstat(fstat_fd_, &info) != 0) return absl::InternalError("fstat");
    }
    if (!fill_) return absl::OkStatus();
    timespec cpu0{};
    if (cpu_clock_) clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
    const auto start = std::chrono::steady_clock::now();
    Fill(index, out);
    ReadClock::Add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count());
    if (cpu_clock_) {
      timespec cpu1{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
      ReadClock::AddCpu((cpu1.tv_sec - cpu0.tv_sec) * 1'000'000'000 +
                        (cpu1.tv_nsec - cpu0.tv_nsec));
    }
    return absl::OkStatus();
  }

 private:
  void Fill(int64_t index, pinwheel::SampleView& out) const {
    // Raw pointers, as the batch fills: Debian's Abseil is built hardened
    // (ABSL_OPTION_HARDENED), so Span's operator[] checks every index.
    const uint64_t key = Mix(static_cast<uint64_t>(index));
    if (w_.name == "w2") {
      FillW2Sample(w_, key, out.field_as<int64_t>(0).data(),
                   out.field_as<int64_t>(1).data());
    } else {
      FillW1Sample(w_, key, out.field(0).data(),
                   out.field_as<int64_t>(1).data());
    }
  }

  const Workload& w_;
  const pinwheel::SampleLayout layout_;
  const int64_t size_;
  const bool fill_;
  const int fstat_fd_;
  const bool cpu_clock_ = absl::GetFlag(FLAGS_cpu_clock);
};

struct PinwheelRow {
  int workers = 0;
  int prefetch = 0;
  int device_buffers = 0;
  bool fill = true;
  bool host = false;   // the host backend (copies by a thread, no CUDA)
  bool fstat = false;  // an fstat() per Read
  std::string name() const {
    return "pinwheel " + std::to_string(workers) + "x" +
           std::to_string(prefetch) + "x" + std::to_string(device_buffers) +
           (fill ? "" : " no fill") + (host ? " host" : "") +
           (fstat ? " fstat" : "");
  }
};

#define CHECK_OK(expr)                                                \
  do {                                                                \
    const absl::Status s_ = (expr);                                   \
    if (!s_.ok()) {                                                   \
      std::fprintf(stderr, "%s: %s\n", #expr, s_.ToString().c_str()); \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)

// Returns batches/s of a pinwheel Loader over the workload's fill.
double PinwheelRate(const Workload& w, const PinwheelRow& row,
                    int64_t batches) {
  const bool small = w.name == "w2";
  std::vector<pinwheel::FieldSpec> fields;
  if (small) {
    fields.push_back({.name = "input",
                      .dtype = pinwheel::DType::kInt64,
                      .shape = {kW2SeqLen}});
    fields.push_back({.name = "target",
                      .dtype = pinwheel::DType::kInt64,
                      .shape = {kW2SeqLen}});
  } else {
    fields.push_back({.name = "image",
                      .dtype = pinwheel::DType::kUInt8,
                      .shape = {3, 224, 224}});
    fields.push_back(
        {.name = "label", .dtype = pinwheel::DType::kInt64, .shape = {}});
  }
  absl::StatusOr<pinwheel::SampleLayout> layout =
      pinwheel::SampleLayout::Create(fields);
  CHECK_OK(layout.status());
  const int fd = row.fstat ? open("/proc/self/exe", O_RDONLY) : -1;
  auto dataset = std::make_shared<FillDataset>(
      w, *layout, small ? 48'000 : kW1Samples, row.fill, fd);
  absl::StatusOr<pinwheel::Device> device =
      row.host ? pinwheel::Device::Host() : pinwheel::Device::Cuda(0);
  CHECK_OK(device.status());
  absl::StatusOr<pinwheel::Loader> loader =
      pinwheel::LoaderBuilder(dataset)
          .batch_size(small ? kW2Batch : kW1Batch)
          .drop_last(true)
          .shuffle(7)
          .num_workers(row.workers)
          .prefetch(row.prefetch)
          .device_buffers(row.device_buffers)
          .device(*device)
          .Build();
  CHECK_OK(loader.status());
  cudaStream_t native = nullptr;
  if (!row.host)
    CHECK_CUDA(cudaStreamCreateWithFlags(&native, cudaStreamNonBlocking));
  const pinwheel::Stream consumer = pinwheel::Stream::Borrow(*device, native);
  auto synchronize = [&] {
    if (!row.host) CHECK_CUDA(cudaStreamSynchronize(native));
  };
  auto consume = [&] {
    while (true) {
      absl::StatusOr<std::optional<pinwheel::DeviceBatch>> batch =
          loader->Next();
      CHECK_OK(batch.status());
      if (!batch->has_value()) continue;  // the end of an epoch
      CHECK_OK((*batch)->WaitOn(consumer));
      CHECK_OK((*batch)->Release(consumer));
      return;
    }
  };
  for (int i = 0; i < row.prefetch + row.device_buffers; ++i) consume();
  synchronize();
  const double t0 = Now();
  const pinwheel::LoaderStats before = loader->stats();
  const std::pair<int64_t, int> read_before = ReadClock::Sum();
  const int64_t cpu_before = ReadClock::SumCpu();
  for (int64_t i = 0; i < batches; ++i) consume();
  synchronize();
  const double seconds = Now() - t0;
  const pinwheel::LoaderStats after = loader->stats();
  const std::pair<int64_t, int> read_after = ReadClock::Sum();
  const int64_t cpu_after = ReadClock::SumCpu();
  if (absl::GetFlag(FLAGS_cpu_clock)) {
    std::printf(
        "    (%s: inside Read %.2f us wall, %.2f us thread CPU a batch)\n",
        row.name().c_str(),
        static_cast<double>(read_after.first - read_before.first) / 1e3 /
            static_cast<double>(batches),
        static_cast<double>(cpu_after - cpu_before) / 1e3 /
            static_cast<double>(batches));
  }
  // Where the timed batches waited, microseconds a batch.
  const double n = static_cast<double>(batches);
  auto us = [&](absl::Duration d) { return absl::ToDoubleMicroseconds(d) / n; };
  std::printf(
      "    (%s: a batch %.2f us; consumer wait %.2f, slot wait %.2f, "
      "buffer wait %.2f, copy thread idle %.2f, copy issue %.2f us; "
      "%.0f%% copies issued by a worker; inside Read %.2f us of "
      "thread time; %d threads have read in this process)\n",
      row.name().c_str(), seconds * 1e6 / n,
      us(after.consumer_wait - before.consumer_wait),
      us(after.ring.time_waited - before.ring.time_waited),
      us(after.transfer.buffer_wait_time - before.transfer.buffer_wait_time),
      us(after.transfer.idle_time - before.transfer.idle_time),
      us(after.transfer.issue_time - before.transfer.issue_time),
      100.0 *
          static_cast<double>(after.transfer.inline_copies -
                              before.transfer.inline_copies) /
          n,
      static_cast<double>(read_after.first - read_before.first) / 1e3 / n,
      read_after.second);
  loader->Shutdown();  // before the consumer stream goes
  if (!row.host) cudaStreamDestroy(native);
  if (fd >= 0) close(fd);
  return static_cast<double>(batches) / seconds;
}

std::vector<PinwheelRow> ParsePinwheelRows(const std::string& list) {
  std::vector<PinwheelRow> rows;
  for (absl::string_view spec : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    PinwheelRow row;
    if (absl::ConsumeSuffix(&spec, ":fstat")) row.fstat = true;
    if (absl::ConsumeSuffix(&spec, ":host")) row.host = true;
    if (absl::ConsumeSuffix(&spec, ":nofill")) row.fill = false;
    std::vector<absl::string_view> parts = absl::StrSplit(spec, 'x');
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &row.workers) ||
        !absl::SimpleAtoi(parts[1], &row.prefetch) ||
        !absl::SimpleAtoi(parts[2], &row.device_buffers)) {
      std::fprintf(stderr, "--pinwheel: '%.*s' is not TxRxD[:nofill]\n",
                   static_cast<int>(spec.size()), spec.data());
      std::exit(2);
    }
    rows.push_back(row);
  }
  return rows;
}

std::vector<int> ParseInts(const std::string& list) {
  std::vector<int> out;
  for (absl::string_view s : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(s, &v) || v < 0) {
      std::fprintf(stderr, "bad number '%.*s'\n", static_cast<int>(s.size()),
                   s.data());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

// Runs `measure` --repeat times; prints "name  median [min-max] batches/s"
// and the median in GB/s and as a share of `reference` (batches/s; 0: none).
template <typename F>
double Row(const std::string& name, size_t batch_bytes, double reference,
           F&& measure) {
  std::vector<double> rates;
  for (int i = 0; i < absl::GetFlag(FLAGS_repeat); ++i)
    rates.push_back(measure());
  std::sort(rates.begin(), rates.end());
  const double median = rates[rates.size() / 2];
  std::printf("  %-34s %10.0f [%.0f-%.0f] batches/s %7.2f GB/s", name.c_str(),
              median, rates.front(), rates.back(),
              median * static_cast<double>(batch_bytes) / 1e9);
  if (reference > 0) std::printf("  %.3f of hot copy", median / reference);
  std::printf("\n");
  std::fflush(stdout);
  return median;
}

void RunWorkload(const std::string& name, const std::vector<int>& threads) {
  const Workload w = MakeWorkload(name);
  const size_t bytes = w.batch_bytes;
  const double seconds = absl::GetFlag(FLAGS_seconds);
  // Batches for about `seconds` at the hot copy's rate, guessed from 45 GB/s.
  const int64_t batches = std::max<int64_t>(
      20, static_cast<int64_t>(seconds * 45e9 / static_cast<double>(bytes)));
  std::printf("%s: %.3f MB a batch, %lld copies a copy row\n", name.c_str(),
              static_cast<double>(bytes) / 1e6,
              static_cast<long long>(batches));
  const bool small = name == "w2";
  const std::vector<int> ring_sizes =
      small ? std::vector<int>{4, 32, 512} : std::vector<int>{2, 4, 8};
  const int max_slots = ring_sizes.back();
  PinnedSlots ring(max_slots, bytes);
  DeviceSide dev(4, bytes);

  const std::vector<std::byte*> one(1, ring.slots[0]);
  const double hot = Row("copy hot (one buffer)", bytes, 0,
                         [&] { return CopyRate(one, bytes, dev, batches); });
  const bool references = absl::GetFlag(FLAGS_reference_rows);
  for (int r : references ? ring_sizes : std::vector<int>{}) {
    const std::vector<std::byte*> slots(ring.slots.begin(),
                                        ring.slots.begin() + r);
    Row("copy ring " + std::to_string(r) + " (" +
            std::to_string(r * bytes >> 20) + " MiB)",
        bytes, hot, [&] { return CopyRate(slots, bytes, dev, batches); });
  }
  const int ring_rows = small ? 32 : 4;
  const std::vector<std::byte*> fixed(ring.slots.begin(),
                                      ring.slots.begin() + ring_rows);
  for (int t : references ? threads : std::vector<int>{}) {
    if (t == 0) continue;
    MemcpyLoad load(t);
    Row("copy ring " + std::to_string(ring_rows) + " + memcpy x" +
            std::to_string(t),
        bytes, hot, [&] {
          load.Start();
          const double rate = CopyRate(fixed, bytes, dev, batches);
          load.Stop();
          return rate;
        });
  }
  for (int t : references ? threads : std::vector<int>{}) {
    if (t == 0) continue;
    PinnedSlots fill_ring(small ? 32 : 4, bytes);
    Row("fill x" + std::to_string(t) + " (no copy)", bytes, hot,
        [&] { return FillRate(w, fill_ring, t, seconds); });
  }
  if (absl::GetFlag(FLAGS_block_rows)) {
    // One allocation carved into slots (pinwheel's ring) against one
    // allocation a slot, with the same fill and the smallest pipeline.
    for (bool one_block : {false, true}) {
      const std::string kind = one_block ? " one block" : " a block each";
      PinnedSlots fill_ring(32, bytes, one_block);
      Row("fill x1 ring 32" + kind, bytes, hot,
          [&] { return FillRate(w, fill_ring, 1, seconds); });
      Row("fill+copy x1, one thread, ring 32" + kind, bytes, hot,
          [&] { return FillCopyRate(w, fill_ring, dev, batches / 4); });
      for (int t : threads) {
        if (t == 0) continue;
        Row("ideal x" + std::to_string(t) + " ring 32" + kind, bytes, hot,
            [&] { return IdealRate(w, fill_ring, dev, t, batches, true); });
      }
    }
  }
  std::string pinwheel_rows = absl::GetFlag(FLAGS_pinwheel);
  if (pinwheel_rows.empty()) {
    pinwheel_rows =
        small ? "1x32x4:nofill,8x32x4:nofill,8x8x2,14x32x4,14x32x8,8x32x4"
              : "14x2x2,14x4x2,14x8x2,14x2x2:nofill,14x8x2:nofill";
  }
  for (const PinwheelRow& row : ParsePinwheelRows(pinwheel_rows)) {
    Row(row.name(), bytes, hot, [&] { return PinwheelRate(w, row, batches); });
  }
  for (int r : references ? ring_sizes : std::vector<int>{}) {
    if (r == 512) continue;
    PinnedSlots ideal_ring(r, bytes);
    Row("ideal, no fill, ring " + std::to_string(r), bytes, hot,
        [&] { return IdealRate(w, ideal_ring, dev, 1, batches, false); });
    for (int t : threads) {
      if (t == 0) continue;
      Row("ideal x" + std::to_string(t) + " ring " + std::to_string(r), bytes,
          hot, [&] { return IdealRate(w, ideal_ring, dev, t, batches, true); });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_blocking_sync)) {
    CHECK_CUDA(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
  }
  CHECK_CUDA(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("copy_limits on %s, %u host threads, %d repetition(s) a row%s\n",
              prop.name, std::thread::hardware_concurrency(),
              absl::GetFlag(FLAGS_repeat),
              absl::GetFlag(FLAGS_blocking_sync) ? ", blocking sync" : "");
  const std::vector<int> threads = ParseInts(absl::GetFlag(FLAGS_threads));
  if (absl::GetFlag(FLAGS_reference_rows)) {
    std::printf(
        "host memory bandwidth (memcpy of 64 MiB blocks, bytes copied)\n");
    for (int t : threads) {
      if (t == 0) continue;
      MemcpyLoad load(t);
      std::vector<double> rates;
      for (int i = 0; i < absl::GetFlag(FLAGS_repeat); ++i) {
        const double t0 = Now();
        load.Start();
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        const int64_t copied = load.Stop();
        rates.push_back(static_cast<double>(copied) / (Now() - t0) / 1e9);
      }
      std::sort(rates.begin(), rates.end());
      std::printf("  memcpy x%-3d %7.1f GB/s [%.1f-%.1f]\n", t,
                  rates[rates.size() / 2], rates.front(), rates.back());
    }
  }
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_workloads), ',', absl::SkipEmpty())) {
    if (name != "w1" && name != "w2") {
      std::fprintf(stderr, "unknown workload '%.*s'\n",
                   static_cast<int>(name.size()), name.data());
      return 2;
    }
    RunWorkload(std::string(name), threads);
  }
  return 0;
}
