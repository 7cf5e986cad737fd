// pinwheel_multi_bench: N loaders at once, one per GPU (issues 11 and 30).
// Two ways to run it, each printing per-rank and aggregate rates beside the
// aggregate raw pinned copy (cudaMemcpyAsync from one page-locked buffer,
// every GPU of every process at once) measured in the same repetition, and a
// host-memory copy loop (memcpy on every allowed CPU of every process at
// once) beside them:
//
//   pinwheel_multi_bench                      # one process, a loader per GPU
//   mpirun -np 2 pinwheel_multi_bench         # a process per GPU, MPI
//   torchrun --nproc_per_node=2 --no-python pinwheel_multi_bench
//       --results_dir=/tmp/run1               # any launcher: a shared folder
//
// Workloads (`--workloads`): w1, W1-like images in memory (u8[3,224,224] and
// an i64 label, 2048 samples, batches of 256: 38.5 MB); w2, W2-like token
// windows of a u16 token file (i64 input and target, seq_len 1024, batches
// of 32: 0.5 MB). Paths (`--paths`): workers (the worker threads fill
// pinned slots, a copy each), gather (LoaderOptions::gather: the device
// gathers the rows from the dataset's registered memory, no worker copy)
// and, on GPUs, staged: the worker path without a loader (--workers threads
// each memcpy whole batches from a source as large as the dataset into two
// pinned buffers of their own and copy them to the GPU; StagedCopyAtOnce),
// the workers path's ceiling on this host.
// Every row is measured `--repeat` times, in rounds (memcpy, then per
// workload: raw, each path), and printed as median [min-max].
//
// Rank and world size come from the launcher's variables
// (LaunchEnvironment); the processes meet through MPI when Open MPI
// launched them and the sample was built with MPI, else through the files
// of --results_dir (which then also keeps every rank's numbers). Without
// GPUs it runs the same on the host backend (no raw copy; the GB/s mean
// nothing there): what ctest runs.
//
// Note [the worker path's ceiling]
// A worker-path batch crosses host memory three times: the worker reads the
// sample, writes the pinned slot (a memcpy), and the DMA engine reads the
// slot. The gather path makes only the last of these. So with several GPUs
// pulling at once the worker path is bounded by the host's memory
// bandwidth before PCIe. The staged row measures that bound directly: the
// same threads doing the worker path's copies with no loader around them
// (StagedCopyAtOnce). On 2 x H200 (2026-11-27, --streaming_stores) it moved
// 80.4 GB/s and the workers 79.2-80.0, at 0.72-0.73 of the raw copy. The
// memcpy row (every allowed CPU copying, no DMA) is printed for scale but
// does not predict the ceiling: two hosts' probes read 71-76 and 42-46 GB/s
// while their worker paths ran at 0.59-0.64 and 0.72-0.73 of raw. Under a
// launcher that binds each rank to one core (Open MPI's default for np <=
// 2) the memcpy, staged and workers rows collapse together: the "cores
// used" column and each rank's CPU list show it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "loader/launch_environment.h"
#include "loader/numa_placement.h"
#include "pinning/base/status_macros.h"
#include "samples/bench/host_memory_bandwidth.h"
#include "samples/bench/mpi_rendezvous.h"
#include "samples/bench/multi_rows.h"
#include "samples/bench/multi_summary.h"
#include "samples/bench/rendezvous.h"
#include "samples/bench/report.h"
#include "samples/bench/workloads.h"
#include "transfer/device.h"

ABSL_FLAG(std::string, device, "auto",
          "auto: every GPU (cuda:local_rank under a launcher), else the "
          "host; cpu: host loaders; or a list of GPUs such as 0,1");
ABSL_FLAG(int, loaders_per_device, 1, "loaders per device (in one process)");
ABSL_FLAG(int, host_loaders, 2, "loaders per process with --device=cpu");
ABSL_FLAG(std::string, workloads, "w1,w2", "w1 (images), w2 (tokens)");
ABSL_FLAG(std::string, paths, "workers,gather,staged",
          "workers, gather, staged (GPUs only: the workers path's ceiling)");
ABSL_FLAG(int, repeat, 3, "repetitions of every row");
ABSL_FLAG(int, workers, 8, "worker threads per loader (workers path)");
ABSL_FLAG(int, prefetch, 4, "pinned slots per loader (workers path)");
ABSL_FLAG(bool, keep_launcher_binding, false,
          "loaders keep Open MPI's default one-core binding "
          "(LoaderOptions::keep_launcher_binding)");
ABSL_FLAG(int, device_buffers, 2, "device buffers per loader (workers path)");
ABSL_FLAG(int, gather_prefetch, 32, "pinned key slots (gather path)");
ABSL_FLAG(int, gather_device_buffers, 4, "device buffers (gather path)");
ABSL_FLAG(int, batches, 100, "timed w1 batches per loader a repetition");
ABSL_FLAG(int, w2_batches, 5000, "timed w2 batches per loader a repetition");
ABSL_FLAG(int, warmup, 5, "untimed batches per loader first");
ABSL_FLAG(int64_t, w1_samples, 2048, "w1: images in memory");
ABSL_FLAG(int, w1_side, 224, "w1: images are u8[3, side, side]");
ABSL_FLAG(int64_t, w1_batch, 256, "w1: batch size");
ABSL_FLAG(bool, streaming_stores, false,
          "w1: Read writes the pinned slot with non-temporal stores (x86; "
          "see ImageDatasetOptions::streaming_stores in workloads.h)");
ABSL_FLAG(int64_t, w2_tokens, 50'000'000, "w2: tokens in the token file");
ABSL_FLAG(int64_t, w2_seq_len, 1024, "w2: window length");
ABSL_FLAG(int64_t, w2_batch, 32, "w2: batch size");
ABSL_FLAG(std::string, token_file, "/tmp/pinwheel_multi_bench_tokens.u16",
          "w2's token file (written when missing or of another size)");
ABSL_FLAG(int, memcpy_threads, 0,
          "threads of the host-memory copy loop per process; 0: the CPUs "
          "the process may use (its affinity)");
ABSL_FLAG(int, memcpy_mib, 64, "MiB per buffer per memcpy thread (x2)");
ABSL_FLAG(double, memcpy_seconds, 0.5, "seconds of memcpy per repetition");
ABSL_FLAG(std::string, results_dir, "",
          "a folder the ranks share (one per run): every rank's numbers as "
          "files, and how the ranks meet when MPI is not used");
ABSL_FLAG(std::string, json, "", "rank 0 writes one JSON line per line");

namespace pinwheel::bench {
namespace {

// How this process's ranks meet: MPI under Open MPI when built with it,
// else the --results_dir files, else (one process) nothing.
absl::StatusOr<std::unique_ptr<Rendezvous>> MeetTheOthers(
    int* argc, char*** argv, const LaunchEnvironment& env) {
  const std::string dir = absl::GetFlag(FLAGS_results_dir);
#if PINWHEEL_BENCH_HAVE_MPI
  if (env.launcher == "openmpi" && dir.empty()) {
    return MpiRendezvous(argc, argv, env.rank, env.world_size);
  }
#endif
  (void)argc;
  (void)argv;
  if (!dir.empty()) return FileRendezvous::Open(dir, env.rank, env.world_size);
  if (env.world_size == 1) return SingleProcessRendezvous();
  return absl::FailedPreconditionError(absl::StrCat(
      "launched as ", env.ToString(),
      " without MPI in this build (or not under Open MPI): pass "
      "--results_dir=DIR, a folder all ranks share, so they can meet"));
}

absl::StatusOr<std::vector<Device>> DevicesOfThisProcess(
    const LaunchEnvironment& env) {
  const std::string flag = absl::GetFlag(FLAGS_device);
  std::vector<Device> gpus;
  if (flag == "cpu" || flag == "host" ||
      (flag == "auto" && Device::CudaDeviceCount() == 0)) {
    return std::vector<Device>(absl::GetFlag(FLAGS_host_loaders),
                               Device::Host());
  }
  if (flag == "auto" && env.world_size > 1) {
    PINWHEEL_ASSIGN_OR_RETURN(Device d, env.LocalDevice());
    gpus.push_back(d);
  } else if (flag == "auto") {
    for (int i = 0; i < Device::CudaDeviceCount(); ++i) {
      gpus.push_back(*Device::Cuda(i));
    }
  } else {
    for (absl::string_view part : absl::StrSplit(flag, ',')) {
      int ordinal = 0;
      if (!absl::SimpleAtoi(part, &ordinal)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--device=", flag, ": '", part, "' is not a GPU number"));
      }
      PINWHEEL_ASSIGN_OR_RETURN(Device d, Device::Cuda(ordinal));
      gpus.push_back(d);
    }
  }
  std::vector<Device> devices;
  for (const Device& d : gpus) {
    for (int k = 0; k < absl::GetFlag(FLAGS_loaders_per_device); ++k) {
      devices.push_back(d);
    }
  }
  return devices;
}

absl::StatusOr<std::vector<std::string>> ListFlag(
    const char* name, const std::string& value,
    const std::vector<std::string>& allowed) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(value, ',', absl::SkipEmpty())) {
    if (std::find(allowed.begin(), allowed.end(), item) == allowed.end()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--%s=%s: '%s' is not one of %s", name, value, item,
                          absl::StrJoin(allowed, ", ")));
    }
    out.emplace_back(item);
  }
  return out;
}

absl::Status CheckFlags() {
  const std::vector<std::pair<const char*, int64_t>> at_least_one = {
      {"repeat", absl::GetFlag(FLAGS_repeat)},
      {"workers", absl::GetFlag(FLAGS_workers)},
      {"prefetch", absl::GetFlag(FLAGS_prefetch)},
      {"device_buffers", absl::GetFlag(FLAGS_device_buffers)},
      {"gather_prefetch", absl::GetFlag(FLAGS_gather_prefetch)},
      {"gather_device_buffers", absl::GetFlag(FLAGS_gather_device_buffers)},
      {"batches", absl::GetFlag(FLAGS_batches)},
      {"w2_batches", absl::GetFlag(FLAGS_w2_batches)},
      {"warmup", absl::GetFlag(FLAGS_warmup)},
      {"w1_samples", absl::GetFlag(FLAGS_w1_samples)},
      {"w1_side", absl::GetFlag(FLAGS_w1_side)},
      {"w1_batch", absl::GetFlag(FLAGS_w1_batch)},
      {"w2_seq_len", absl::GetFlag(FLAGS_w2_seq_len)},
      {"w2_batch", absl::GetFlag(FLAGS_w2_batch)},
      {"memcpy_mib", absl::GetFlag(FLAGS_memcpy_mib)},
      {"loaders_per_device", absl::GetFlag(FLAGS_loaders_per_device)},
      {"host_loaders", absl::GetFlag(FLAGS_host_loaders)},
  };
  for (const auto& [name, value] : at_least_one) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--%s=%d: must be >= 1", name, value));
    }
  }
  if (absl::GetFlag(FLAGS_w2_tokens) <= absl::GetFlag(FLAGS_w2_seq_len)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--w2_tokens=%d: must be more than --w2_seq_len=%d",
        absl::GetFlag(FLAGS_w2_tokens), absl::GetFlag(FLAGS_w2_seq_len)));
  }
  if (absl::GetFlag(FLAGS_memcpy_threads) < 0) {
    return absl::InvalidArgumentError("--memcpy_threads must be >= 0");
  }
  return absl::OkStatus();
}

std::vector<RankShare> Shares(const std::vector<std::vector<double>>& all) {
  std::vector<RankShare> shares;
  for (const std::vector<double>& v : all) {
    shares.push_back({.batches = v[0], .seconds = v[1], .cpu_seconds = v[2]});
  }
  return shares;
}

// Every rank's share of `mine`, gathered at step `tag`.
absl::StatusOr<std::vector<RankShare>> Gather(Rendezvous& rendezvous,
                                              absl::string_view tag,
                                              const ProcessShare& mine) {
  PINWHEEL_ASSIGN_OR_RETURN(
      auto all, rendezvous.AllGather(
                    tag, {mine.batches, mine.seconds, mine.cpu_seconds}));
  return Shares(all);
}

struct Workload {
  std::string name;
  std::shared_ptr<const Dataset> dataset;
  int64_t batch_size = 0;
  double batch_bytes = 0;
  int batches = 0;
};

absl::StatusOr<Workload> OpenWorkload(const std::string& name,
                                      const Rendezvous& rendezvous) {
  Workload w{.name = name};
  if (name == "w1") {
    PINWHEEL_ASSIGN_OR_RETURN(
        w.dataset, MakeImageDataset({.samples = absl::GetFlag(FLAGS_w1_samples),
                                     .side = absl::GetFlag(FLAGS_w1_side),
                                     .streaming_stores = absl::GetFlag(
                                         FLAGS_streaming_stores)}));
    w.batch_size = absl::GetFlag(FLAGS_w1_batch);
    w.batches = absl::GetFlag(FLAGS_batches);
  } else {
    // Each rank writes its own copy (a path per rank) unless one process.
    std::string path = absl::GetFlag(FLAGS_token_file);
    if (rendezvous.world_size() > 1) {
      absl::StrAppend(&path, ".rank", rendezvous.rank());
    }
    PINWHEEL_RETURN_IF_ERROR(
        EnsureTokenFile(path, absl::GetFlag(FLAGS_w2_tokens)).status());
    PINWHEEL_ASSIGN_OR_RETURN(
        w.dataset,
        OpenTokenDataset(path, absl::GetFlag(FLAGS_w2_seq_len), /*seed=*/11));
    w.batch_size = absl::GetFlag(FLAGS_w2_batch);
    w.batches = absl::GetFlag(FLAGS_w2_batches);
  }
  w.batch_bytes = static_cast<double>(w.dataset->layout().sample_bytes() *
                                      static_cast<size_t>(w.batch_size));
  return w;
}

std::string Names(const std::vector<Device>& devices) {
  std::vector<std::string> names;
  for (const Device& d : devices) names.push_back(d.ToString());
  return absl::StrJoin(names, ", ");
}

absl::Status RunRank(const LaunchEnvironment& env,
                     std::unique_ptr<Rendezvous>& rendezvous) {
  PINWHEEL_RETURN_IF_ERROR(CheckFlags());
  PINWHEEL_ASSIGN_OR_RETURN(
      std::vector<std::string> workloads,
      ListFlag("workloads", absl::GetFlag(FLAGS_workloads), {"w1", "w2"}));
  PINWHEEL_ASSIGN_OR_RETURN(std::vector<std::string> paths,
                            ListFlag("paths", absl::GetFlag(FLAGS_paths),
                                     {"workers", "gather", "staged"}));
  PINWHEEL_ASSIGN_OR_RETURN(std::vector<Device> devices,
                            DevicesOfThisProcess(env));
  PINWHEEL_ASSIGN_OR_RETURN(CpuAllowance cpus, AllowedCpus());
  const bool root = rendezvous->rank() == 0;
  const int world = rendezvous->world_size();
  JsonLinesWriter json;
  if (root && !absl::GetFlag(FLAGS_json).empty()) {
    PINWHEEL_ASSIGN_OR_RETURN(json,
                              JsonLinesWriter::Open(absl::GetFlag(FLAGS_json)));
  }
  // Every rank says where it runs (the CPU list is the launcher's binding).
  PINWHEEL_ASSIGN_OR_RETURN(
      auto allowed,
      rendezvous->AllGather("cpus", {static_cast<double>(cpus.count)}));
  int cpus_in_all = 0;
  std::vector<std::string> per_rank_cpus;
  for (const auto& v : allowed) {
    cpus_in_all += static_cast<int>(v[0]);
    per_rank_cpus.push_back(absl::StrCat(static_cast<int>(v[0])));
  }
  absl::PrintF(
      "rank %d of %d (%s; meeting: %s): %s; %d of %d CPUs allowed "
      "(%s); %s\n",
      rendezvous->rank(), world, env.launcher, rendezvous->Describe(),
      Names(devices), cpus.count, cpus.online, cpus.list,
      NumaPlacementFor(devices.front()).description);
  std::fflush(stdout);
  PINWHEEL_RETURN_IF_ERROR(rendezvous->Barrier("hello"));
  const bool on_gpus = devices.front().is_cuda();
  if (!on_gpus) std::erase(paths, std::string("staged"));  // no DMA to stage
  if (root) {
    absl::PrintF(
        "multi-loader benchmark: %d process(es) x %d loader(s); workers path "
        "%d workers, %d slots, %d device buffers; gather path %d slots, %d "
        "device buffers; %d repetitions; CPUs allowed per rank: %s\n",
        world, static_cast<int>(devices.size()), absl::GetFlag(FLAGS_workers),
        absl::GetFlag(FLAGS_prefetch), absl::GetFlag(FLAGS_device_buffers),
        absl::GetFlag(FLAGS_gather_prefetch),
        absl::GetFlag(FLAGS_gather_device_buffers), absl::GetFlag(FLAGS_repeat),
        absl::StrJoin(per_rank_cpus, "+"));
    if (!on_gpus) {
      absl::PrintF(
          "  host backend: no raw copy, and the GB/s are a smoke "
          "run's, not a measurement of GPU transfer\n");
    }
    std::fflush(stdout);
  }
  std::vector<Device> gpus;  // one raw copy per distinct GPU
  for (const Device& d : devices) {
    if (d.is_cuda() && std::find(gpus.begin(), gpus.end(), d) == gpus.end()) {
      gpus.push_back(d);
    }
  }
  const int repeat = absl::GetFlag(FLAGS_repeat);
  const int memcpy_threads = absl::GetFlag(FLAGS_memcpy_threads) > 0
                                 ? absl::GetFlag(FLAGS_memcpy_threads)
                                 : cpus.count;
  MultiRow memcpy_row{.workload = "host", .path = "memcpy", .batch_bytes = 1};
  std::vector<MultiRow> rows;  // per workload: raw (if GPUs), then paths
  std::vector<Workload> opened;
  for (const std::string& name : workloads) {
    PINWHEEL_ASSIGN_OR_RETURN(Workload w, OpenWorkload(name, *rendezvous));
    if (on_gpus) {
      rows.push_back(
          {.workload = name, .path = "raw", .batch_bytes = w.batch_bytes});
    }
    for (const std::string& path : paths) {
      rows.push_back(
          {.workload = name, .path = path, .batch_bytes = w.batch_bytes});
    }
    opened.push_back(std::move(w));
  }
  for (int rep = 1; rep <= repeat; ++rep) {
    // The host's memory, every allowed CPU of every rank copying at once.
    PINWHEEL_ASSIGN_OR_RETURN(
        MemoryBandwidth b,
        MeasureMemcpyBandwidth(
            {.threads = memcpy_threads,
             .bytes_per_thread =
                 static_cast<size_t>(absl::GetFlag(FLAGS_memcpy_mib)) << 20,
             .seconds = absl::GetFlag(FLAGS_memcpy_seconds),
             .ready = [&] { return rendezvous->Barrier("memcpy"); }}));
    PINWHEEL_ASSIGN_OR_RETURN(
        auto copied,
        rendezvous->AllGather("memcpy_done", {b.bytes_copied, b.seconds, 0}));
    memcpy_row.reps.push_back(Shares(copied));
    size_t row = 0;
    for (const Workload& w : opened) {
      double raw_gbps = 0;
      if (on_gpus) {
        MultiRow& raw = rows[row++];
        PINWHEEL_ASSIGN_OR_RETURN(
            ProcessShare mine,
            RawCopyAtOnce(gpus, static_cast<size_t>(w.batch_bytes), w.batches,
                          *rendezvous));
        PINWHEEL_ASSIGN_OR_RETURN(std::vector<RankShare> all,
                                  Gather(*rendezvous, "raw_done", mine));
        raw_gbps = AggregateGbps(all, w.batch_bytes);
        raw.reps.push_back(std::move(all));
        raw.raw_gbps.push_back(raw_gbps);
      }
      for (const std::string& path : paths) {
        MultiRow& r = rows[row++];
        if (path == "staged") {
          const size_t batch = static_cast<size_t>(w.batch_bytes);
          const StagedCopyConfig staged{
              .batch_bytes = batch,
              .source_bytes = std::min<size_t>(
                  size_t{1} << 30, static_cast<size_t>(w.dataset->size()) *
                                       w.dataset->layout().sample_bytes()),
              .threads = absl::GetFlag(FLAGS_workers),
              .batches = w.batches,
              .streaming = absl::GetFlag(FLAGS_streaming_stores)};
          PINWHEEL_ASSIGN_OR_RETURN(
              ProcessShare mine, StagedCopyAtOnce(gpus, staged, *rendezvous));
          PINWHEEL_ASSIGN_OR_RETURN(std::vector<RankShare> all,
                                    Gather(*rendezvous, "staged_done", mine));
          r.raw_gbps.push_back(raw_gbps);
          r.reps.push_back(std::move(all));
          continue;
        }
        const bool gather = path == "gather";
        LoaderRowConfig config{
            .batch_size = w.batch_size,
            .workers = gather ? 1 : absl::GetFlag(FLAGS_workers),
            .prefetch = gather ? absl::GetFlag(FLAGS_gather_prefetch)
                               : absl::GetFlag(FLAGS_prefetch),
            .device_buffers = gather
                                  ? absl::GetFlag(FLAGS_gather_device_buffers)
                                  : absl::GetFlag(FLAGS_device_buffers),
            .gather = gather ? GatherMode::kOn : GatherMode::kOff,
            .warmup = absl::GetFlag(FLAGS_warmup),
            .batches = w.batches,
            .keep_launcher_binding =
                absl::GetFlag(FLAGS_keep_launcher_binding)};
        absl::StatusOr<ProcessShare> mine =
            LoadersAtOnce(devices, w.dataset, config, *rendezvous);
        if (!mine.ok()) {
          return absl::Status(
              mine.status().code(),
              absl::StrCat(w.name, " ", path, " path, rank ",
                           rendezvous->rank(), ": ", mine.status().message()));
        }
        PINWHEEL_ASSIGN_OR_RETURN(std::vector<RankShare> all,
                                  Gather(*rendezvous, "loaders_done", *mine));
        if (on_gpus) r.raw_gbps.push_back(raw_gbps);
        if (root) {
          absl::PrintF("  rep %d/%d %s %-7s aggregate %8.2f GB/s%s\n", rep,
                       repeat, w.name, path, AggregateGbps(all, w.batch_bytes),
                       on_gpus ? absl::StrFormat("  (raw %.1f GB/s)", raw_gbps)
                               : std::string());
          std::fflush(stdout);
        }
        r.reps.push_back(std::move(all));
      }
    }
  }
  if (!root) return absl::OkStatus();
  const std::vector<std::pair<std::string, std::string>> context = {
      {"launcher", JsonString(env.launcher)},
      {"processes", JsonNumber(world)},
      {"loaders_per_process", JsonNumber(static_cast<double>(devices.size()))},
      {"cpus_allowed", JsonNumber(cpus_in_all)},
      {"cpus_per_rank", JsonString(absl::StrJoin(per_rank_cpus, "+"))},
      {"device", JsonString(on_gpus ? "cuda" : "host")}};
  absl::PrintF(
      "\n== summary: %d process(es) (%s), %d loader(s) each, median "
      "[min-max] of %d repetitions; CPUs allowed per rank %s (%d in all)\n",
      world, env.launcher, static_cast<int>(devices.size()), repeat,
      absl::StrJoin(per_rank_cpus, "+"), cpus_in_all);
  PrintMultiHeader();
  rows.insert(rows.begin(), memcpy_row);
  for (const MultiRow& row : rows) {
    for (const MultiLine& line : Summarize(row)) {
      PrintMultiLine(row, line);
      PINWHEEL_RETURN_IF_ERROR(json.Write(MultiLineToJson(row, line, context)));
    }
  }
  absl::PrintF(
      "host memcpy: %d thread(s) per rank copying at once (GB/s copied; the "
      "memory traffic is twice that). The workers path crosses host memory "
      "once more than the gather path: see Note [the worker path's ceiling] "
      "in samples/bench/multi_loader_main.cc\n",
      memcpy_threads);
  const double memcpy_gbps = Summarize(rows.front()).back().gbps.median;
  for (const MultiRow& row : rows) {
    if (row.path != "workers" && row.path != "gather") continue;
    double staged_gbps = 0;  // the workers path's ceiling, when measured
    for (const MultiRow& other : rows) {
      if (row.path == "workers" && other.path == "staged" &&
          other.workload == row.workload) {
        staged_gbps = Summarize(other).back().gbps.median;
      }
    }
    absl::PrintF("  %s\n", BesideLimits(row, memcpy_gbps, staged_gbps));
  }
  return absl::OkStatus();
}

absl::Status Run(int* argc, char*** argv) {
  PINWHEEL_ASSIGN_OR_RETURN(LaunchEnvironment env,
                            LaunchEnvironment::FromProcess());
  PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<Rendezvous> rendezvous,
                            MeetTheOthers(argc, argv, env));
  const absl::Status status = RunRank(env, rendezvous);
  if (!status.ok()) rendezvous->Abandon(status);
  return status;
}

}  // namespace
}  // namespace pinwheel::bench

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  absl::SetProgramUsageMessage(
      "N loaders at once, each path and workload beside the aggregate raw "
      "pinned copy and a host memcpy loop.\n"
      "  pinwheel_multi_bench                        one process, a loader "
      "per GPU\n"
      "  mpirun -np N pinwheel_multi_bench           one process per GPU\n"
      "  torchrun --nproc_per_node=N --no-python pinwheel_multi_bench "
      "--results_dir=DIR");
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = pinwheel::bench::Run(&argc, &argv);
  if (!status.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "pinwheel_multi_bench: error: %s\n",
                 status.ToString().c_str());
    return 1;
  }
  return 0;
}
