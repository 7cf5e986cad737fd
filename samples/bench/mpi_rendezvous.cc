#include "samples/bench/mpi_rendezvous.h"

#if PINWHEEL_BENCH_HAVE_MPI
#include <cstdio>
#include <memory>
#include <mpi.h>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pinwheel::bench {
namespace {

// MPI_COMM_WORLD as a Rendezvous. Not thread-safe (see Rendezvous).
class MpiWorld final : public Rendezvous {
 public:
  MpiWorld(int rank, int world) : rank_(rank), world_(world) {}
  ~MpiWorld() override { MPI_Finalize(); }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string Describe() const override { return "MPI"; }
  void Abandon(const absl::Status& error) override {
    std::fprintf(stderr, "pinwheel_multi_bench rank %d: error: %s\n", rank_,
                 error.ToString().c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  absl::StatusOr<std::vector<std::vector<double>>> AllGather(
      absl::string_view tag, const std::vector<double>& values) override {
    const int n = static_cast<int>(values.size());
    std::vector<double> all(static_cast<size_t>(n) * world_);
    if (MPI_Allgather(values.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE,
                      MPI_COMM_WORLD) != MPI_SUCCESS) {
      return absl::InternalError(
          absl::StrCat("MPI_Allgather failed at step ", tag));
    }
    std::vector<std::vector<double>> out(world_);
    for (int r = 0; r < world_; ++r) {
      out[r].assign(all.begin() + r * n, all.begin() + (r + 1) * n);
    }
    return out;
  }

 private:
  int rank_;
  int world_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Rendezvous>> MpiRendezvous(int* argc,
                                                          char*** argv,
                                                          int rank,
                                                          int world_size) {
  // The timed loops meet the other ranks from whichever of their threads
  // completes a std::barrier, one thread at a time: MPI_THREAD_SERIALIZED.
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  int mpi_rank = 0, mpi_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  auto world = std::make_unique<MpiWorld>(mpi_rank, mpi_size);
  if (provided < MPI_THREAD_SERIALIZED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this MPI provides thread level ", provided,
        ", below MPI_THREAD_SERIALIZED: run with --results_dir=DIR instead"));
  }
  if (mpi_size != world_size || mpi_rank != rank) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the launcher's variables say rank ", rank, " of ", world_size,
        " but MPI sees rank ", mpi_rank, " of ", mpi_size));
  }
  return std::unique_ptr<Rendezvous>(std::move(world));
}

}  // namespace pinwheel::bench
#endif  // PINWHEEL_BENCH_HAVE_MPI
