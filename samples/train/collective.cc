#include "samples/train/collective.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#if PINWHEEL_TRAIN_HAVE_MPI
#include <mpi.h>
#endif
#if PINWHEEL_TRAIN_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace pinwheel::train {
namespace {

class SingleProcess final : public Collective {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status AverageGradient(float*, int64_t, void*) override {
    return absl::OkStatus();
  }
  absl::Status SumHost(std::vector<double>&) override {
    return absl::OkStatus();
  }
  absl::Status SumHost(std::vector<int32_t>&) override {
    return absl::OkStatus();
  }
  absl::Status AllGatherBytes(const void* mine, size_t bytes,
                              std::vector<uint8_t>& all) override {
    const auto* first = static_cast<const uint8_t*>(mine);
    all.assign(first, first + bytes);
    return absl::OkStatus();
  }
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::Status UseNccl(int) override { return absl::OkStatus(); }
  void Abort(int) override {}
  std::string Describe() const override { return "1 process"; }
};

#if PINWHEEL_TRAIN_HAVE_MPI

absl::Status MpiStatus(int error, const char* call) {
  if (error == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(error, text, &length);
  return absl::InternalError(absl::StrCat(call, ": ", text));
}

#if PINWHEEL_TRAIN_HAVE_NCCL
absl::Status NcclStatus(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(call, ": ", ncclGetErrorString(result)));
}
#endif

class Mpi final : public Collective {
 public:
  Mpi(int rank, int world) : rank_(rank), world_(world) {}
  ~Mpi() override {
#if PINWHEEL_TRAIN_HAVE_NCCL
    if (nccl_ != nullptr) ncclCommDestroy(nccl_);
#endif
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  absl::Status AverageGradient(float* data, int64_t count,
                               void* stream) override {
#if PINWHEEL_TRAIN_HAVE_NCCL
    if (nccl_ != nullptr) {
      return NcclStatus(
          ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat,
                        ncclAvg, nccl_, static_cast<cudaStream_t>(stream)),
          "ncclAllReduce");
    }
#endif
    (void)stream;
    absl::Status s =
        MpiStatus(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count),
                                MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                  "MPI_Allreduce");
    if (!s.ok()) return s;
    const float scale = 1.0f / static_cast<float>(world_);
    for (int64_t i = 0; i < count; ++i) data[i] *= scale;
    return absl::OkStatus();
  }
  absl::Status SumHost(std::vector<double>& values) override {
    return MpiStatus(MPI_Allreduce(MPI_IN_PLACE, values.data(),
                                   static_cast<int>(values.size()), MPI_DOUBLE,
                                   MPI_SUM, MPI_COMM_WORLD),
                     "MPI_Allreduce");
  }
  absl::Status SumHost(std::vector<int32_t>& values) override {
    return MpiStatus(MPI_Allreduce(MPI_IN_PLACE, values.data(),
                                   static_cast<int>(values.size()), MPI_INT32_T,
                                   MPI_SUM, MPI_COMM_WORLD),
                     "MPI_Allreduce");
  }
  absl::Status AllGatherBytes(const void* mine, size_t bytes,
                              std::vector<uint8_t>& all) override {
    all.resize(bytes * static_cast<size_t>(world_));
    return MpiStatus(
        MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all.data(),
                      static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD),
        "MPI_Allgather");
  }
  absl::Status Barrier() override {
    return MpiStatus(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  }
  absl::Status UseNccl(int ordinal) override {
#if PINWHEEL_TRAIN_HAVE_NCCL
    ncclUniqueId id;
    if (rank_ == 0) {
      absl::Status s = NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId");
      if (!s.ok()) return s;
    }
    absl::Status s = MpiStatus(
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    if (!s.ok()) return s;
    // The trainer owns this thread's device (its model lives there).
    if (cudaSetDevice(ordinal) != cudaSuccess) {
      return absl::InternalError(absl::StrCat("cudaSetDevice(", ordinal, ")"));
    }
    s = NcclStatus(ncclCommInitRank(&nccl_, world_, id, rank_),
                   "ncclCommInitRank");
    if (!s.ok()) return s;
    int version = 0;
    ncclGetVersion(&version);
    nccl_version_ = absl::StrFormat("%d.%d.%d", version / 10000,
                                    (version / 100) % 100, version % 100);
    return absl::OkStatus();
#else
    (void)ordinal;
    return absl::FailedPreconditionError(
        "this trainer was built without NCCL: GPU ranks cannot average "
        "gradients on the device (install NCCL and rebuild, or use "
        "--device=cpu)");
#endif
  }
  void Abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }
  std::string Describe() const override {
    if (!nccl_version_.empty()) {
      return absl::StrCat("MPI + NCCL ", nccl_version_, ", ", world_,
                          " ranks (ncclAllReduce on the compute stream)");
    }
    return absl::StrCat("MPI, ", world_, " ranks (MPI_Allreduce)");
  }

 private:
  int rank_;
  int world_;
  std::string nccl_version_;
#if PINWHEEL_TRAIN_HAVE_NCCL
  ncclComm_t nccl_ = nullptr;
#endif
};

#endif  // PINWHEEL_TRAIN_HAVE_MPI

}  // namespace

bool Collective::MpiBuilt() { return PINWHEEL_TRAIN_HAVE_MPI != 0; }
bool Collective::NcclBuilt() { return PINWHEEL_TRAIN_HAVE_NCCL != 0; }

absl::StatusOr<std::unique_ptr<Collective>> Collective::ForLaunch(
    const LaunchEnvironment& env, int* argc, char*** argv) {
  if (env.world_size == 1)
    return std::unique_ptr<Collective>(new SingleProcess);
#if PINWHEEL_TRAIN_HAVE_MPI
  int provided = 0;
  absl::Status s =
      MpiStatus(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided),
                "MPI_Init_thread");
  if (!s.ok()) return s;
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  auto mpi = std::make_unique<Mpi>(rank, world);
  if (rank != env.rank || world != env.world_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "launched as ", env.ToString(), " but MPI sees rank ", rank, " of ",
        world, ": start the ranks with mpirun or srun"));
  }
  return std::unique_ptr<Collective>(std::move(mpi));
#else
  (void)argc;
  (void)argv;
  return absl::FailedPreconditionError(absl::StrCat(
      "launched as ", env.ToString(),
      " but this trainer was built without MPI, so the ranks could not "
      "average gradients: install libopenmpi-dev and rebuild"));
#endif
}

}  // namespace pinwheel::train
