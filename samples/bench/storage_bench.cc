// storage_bench: raw shard bytes from a URL into pinned memory through an
// ObjectStore (loader/storage/), the client's throughput and CPU cost.
//
//   storage_bench --urls='http://127.0.0.1:8080/shard-{000..015}.bin'
//                 [--in_flight=64] [--threads=2] [--request_mib=8]
//                 [--reps=5] [--check]
//
// T caller threads (--threads), each with its own destination buffer, take
// shards in turn and read whole shards with one Read() call each (a group
// of shards per call, enough to keep its share of the K requests in flight
// busy); the store has T I/O threads (StoreOptions::io_threads) and K
// requests in flight (--in_flight), each at most --request_mib MiB. The
// buffers are page-locked (cudaHostAlloc) on a CUDA build with a GPU, else
// ordinary page-aligned memory, which the first line says. Every repetition
// reads every shard once; it prints GB/s (10^9 bytes a second) median
// [min-max] over the repetitions and the process's CPU time per repetition
// (user + system, all threads: the cores used). Loopback measures the
// client, not a network. With --check, every shard's bytes are compared
// with those of the first repetition (a CRC-32C each, inside the timed
// loop: time runs without it).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "loader/storage/open_object_store.h"
#include "loader/storage/shard_pattern.h"
#include "pinning/base/crc32c.h"
#include "pinning/host_allocation.h"
#include "samples/bench/process_usage.h"

namespace pinwheel {
namespace {

struct Flags {
  std::string urls;
  int in_flight = 64;
  int threads = 2;
  int64_t request_mib = 8;
  int reps = 5;
  bool check = false;
};

bool ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    const std::string value =
        equals == std::string::npos ? "" : arg.substr(equals + 1);
    bool ok = true;
    if (name == "--urls") {
      flags.urls = value;
    } else if (name == "--in_flight") {
      ok = absl::SimpleAtoi(value, &flags.in_flight) && flags.in_flight >= 1;
    } else if (name == "--threads") {
      ok = absl::SimpleAtoi(value, &flags.threads) && flags.threads >= 1;
    } else if (name == "--request_mib") {
      ok =
          absl::SimpleAtoi(value, &flags.request_mib) && flags.request_mib >= 1;
    } else if (name == "--reps") {
      ok = absl::SimpleAtoi(value, &flags.reps) && flags.reps >= 1;
    } else if (name == "--check") {
      flags.check = true;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "storage_bench: bad argument '%s'\n", arg.c_str());
      return false;
    }
  }
  if (flags.urls.empty()) {
    std::fprintf(stderr,
                 "usage: storage_bench --urls=PATTERN [--in_flight=K] "
                 "[--threads=T] [--request_mib=M] [--reps=R] [--check]\n");
    return false;
  }
  return true;
}

int Run(const Flags& flags) {
  absl::StatusOr<std::vector<std::string>> urls =
      ExpandShardPattern(flags.urls);
  if (!urls.ok()) {
    std::fprintf(stderr, "storage_bench: %s\n",
                 urls.status().ToString().c_str());
    return 2;
  }
  StoreOptions options;
  options.max_in_flight = flags.in_flight;
  options.io_threads = std::min(flags.threads, flags.in_flight);
  options.max_request_bytes = flags.request_mib << 20;
  absl::StatusOr<std::shared_ptr<ObjectStore>> store =
      OpenObjectStore(urls->front(), options);
  if (!store.ok()) {
    std::fprintf(stderr, "storage_bench: %s\n",
                 store.status().ToString().c_str());
    return 1;
  }
  std::vector<int64_t> sizes;
  int64_t total = 0;
  int64_t largest = 0;
  for (const std::string& url : *urls) {
    absl::StatusOr<int64_t> size = (*store)->Size(url);
    if (!size.ok()) {
      std::fprintf(stderr, "storage_bench: %s\n",
                   size.status().ToString().c_str());
      return 1;
    }
    sizes.push_back(*size);
    total += *size;
    largest = std::max(largest, *size);
  }
  // Shards per Read() call: enough requests to fill a thread's share of K.
  const int64_t requests_per_shard = std::max<int64_t>(
      1, (largest + options.max_request_bytes - 1) / options.max_request_bytes);
  const int share = std::max(1, flags.in_flight / flags.threads);
  const int group = static_cast<int>(
      std::clamp<int64_t>((share + requests_per_shard - 1) / requests_per_shard,
                          1, static_cast<int64_t>(urls->size())));
  std::vector<HostAllocation> buffers;
  std::string memory = "page-locked (cudaHostAlloc)";
  for (int t = 0; t < flags.threads; ++t) {
    const size_t bytes = static_cast<size_t>(largest) * group;
    absl::StatusOr<HostAllocation> block =
        HostAllocation::Allocate(bytes, HostMemoryKind::kPageLocked);
    if (!block.ok()) {
      memory =
          absl::StrCat("ordinary page-aligned memory (no pinned memory here: ",
                       block.status().message(), ")");
      block = HostAllocation::Allocate(bytes, HostMemoryKind::kPageable);
    }
    if (!block.ok()) {
      std::fprintf(stderr, "storage_bench: %s\n",
                   block.status().ToString().c_str());
      return 1;
    }
    buffers.push_back(*std::move(block));
  }
  std::printf(
      "storage_bench: %zu shards, %.3f GB from %s\n  K=%d requests in "
      "flight, T=%d threads (and I/O threads), %lld MiB requests, %d "
      "shard(s) per Read()\n  destination: %s\n",
      urls->size(), static_cast<double>(total) / 1e9, flags.urls.c_str(),
      flags.in_flight, flags.threads, static_cast<long long>(flags.request_mib),
      group, memory.c_str());
  std::vector<uint32_t> crcs(urls->size(), 0);
  std::vector<double> rates;
  std::vector<double> cores;
  for (int rep = 0; rep < flags.reps; ++rep) {
    std::atomic<size_t> next{0};
    std::atomic<int> failures{0};
    const double cpu0 = bench::ProcessCpuSeconds();
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < flags.threads; ++t) {
      threads.emplace_back([&, t] {
        std::vector<RangeRead> reads;
        for (;;) {
          const size_t first = next.fetch_add(group);
          if (first >= urls->size()) return;
          reads.clear();
          for (size_t i = first; i < std::min(urls->size(), first + group);
               ++i) {
            reads.push_back(
                {(*urls)[i], 0,
                 absl::MakeSpan(buffers[t].data() +
                                    (i - first) * static_cast<size_t>(largest),
                                static_cast<size_t>(sizes[i]))});
          }
          if (absl::Status s = (*store)->Read(reads); !s.ok()) {
            std::fprintf(stderr, "storage_bench: %s\n", s.ToString().c_str());
            failures++;
            return;
          }
          if (flags.check) {
            for (size_t j = 0; j < reads.size(); ++j) {
              const absl::Span<std::byte> d = reads[j].destination;
              const uint32_t crc = Crc32c(absl::string_view(
                  reinterpret_cast<const char*>(d.data()), d.size()));
              if (rep == 0) {
                crcs[first + j] = crc;
              } else if (crcs[first + j] != crc) {
                std::fprintf(stderr, "storage_bench: %s differs in rep %d\n",
                             reads[j].url.c_str(), rep + 1);
                failures++;
              }
            }
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    const double cpu = bench::ProcessCpuSeconds() - cpu0;
    if (failures.load() != 0) return 1;
    rates.push_back(static_cast<double>(total) / seconds / 1e9);
    cores.push_back(cpu / seconds);
    std::printf("  rep %d: %.3f GB/s, %.3f s, CPU %.3f s (%.2f cores)\n",
                rep + 1, rates.back(), seconds, cpu, cores.back());
  }
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> sorted_cores = cores;
  std::sort(sorted_cores.begin(), sorted_cores.end());
  std::printf(
      "storage_bench: %.3f GB/s median [%.3f-%.3f] of %d reps; CPU %.2f "
      "cores median [%.2f-%.2f]%s\n",
      sorted[sorted.size() / 2], sorted.front(), sorted.back(), flags.reps,
      sorted_cores[sorted_cores.size() / 2], sorted_cores.front(),
      sorted_cores.back(), flags.check ? "; bytes checked" : "");
  return 0;
}

}  // namespace
}  // namespace pinwheel

int main(int argc, char** argv) {
  pinwheel::Flags flags;
  if (!pinwheel::ParseFlags(argc, argv, flags)) return 2;
  return pinwheel::Run(flags);
}
