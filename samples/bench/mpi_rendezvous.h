// The Rendezvous of ranks that Open MPI launched, over MPI_COMM_WORLD: only
// in a build that found MPI (PINWHEEL_BENCH_HAVE_MPI), and only in
// pinwheel_multi_bench, so the library and the other tools never link MPI.
//
// Example:
//   #if PINWHEEL_BENCH_HAVE_MPI
//   PINWHEEL_ASSIGN_OR_RETURN(std::unique_ptr<Rendezvous> r,
//       MpiRendezvous(&argc, &argv, env.rank, env.world_size));
//   #endif
#ifndef PINWHEEL_SAMPLES_BENCH_MPI_RENDEZVOUS_H_
#define PINWHEEL_SAMPLES_BENCH_MPI_RENDEZVOUS_H_

#if PINWHEEL_BENCH_HAVE_MPI
#include <memory>

#include "absl/status/statusor.h"

#include "samples/bench/rendezvous.h"

namespace pinwheel::bench {

// Initialises MPI (MPI_Init_thread, MPI_THREAD_SERIALIZED: the calls come
// from one thread at a time, not always the main one; the returned object
// finalises it) and returns MPI_COMM_WORLD as a Rendezvous;
// FailedPrecondition when MPI's rank or size is not the launcher's (`rank`
// of `world_size`) or it cannot provide that thread level. Its Abandon() prints
// the error and calls MPI_Abort: the other ranks would otherwise wait in a
// collective forever. Call once per process.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Rendezvous>> MpiRendezvous(
    int* argc, char*** argv, int rank, int world_size);

}  // namespace pinwheel::bench

#endif  // PINWHEEL_BENCH_HAVE_MPI
#endif  // PINWHEEL_SAMPLES_BENCH_MPI_RENDEZVOUS_H_
