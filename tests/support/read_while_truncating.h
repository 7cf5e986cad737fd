// ReadWhileTruncating: the child process of the "truncating the file while
// reads run never kills it" death tests of the file-backed datasets
// (RecordFileDataset, TokenWindowDataset). A read racing a truncation used
// to die of SIGBUS; the child reads while another thread truncates, and its
// exit code says how it went.
//
// Example:
//   EXPECT_EXIT(ReadWhileTruncating(RecordFileDataset::Open(path), path,
//                                   file_bytes, {.stride = 7919}),
//               ::testing::ExitedWithCode(0), "");
#ifndef PINWHEEL_TESTS_SUPPORT_READ_WHILE_TRUNCATING_H_
#define PINWHEEL_TESTS_SUPPORT_READ_WHILE_TRUNCATING_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <memory>
#include <string>
#include <sys/types.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loader/dataset.h"
#include "transfer/sample_layout.h"

namespace pinwheel::testing_support {

struct TruncationOptions {
  // Read i reads sample (i * stride) % size.
  int64_t stride = 1;
  // How long the file stays cut, and whole, each round.
  std::chrono::microseconds pause{20};
};

// Reads samples of `dataset` on this thread for one second while another
// thread truncates `path` to nothing and grows it back to `file_bytes`,
// over and over. Never returns: exits 0 when every read returned OK or
// DataLoss (printing how many were DataLoss), 2 at any other status, 3 when
// the dataset did not open, 4 when a truncation failed. For a death test's
// child (the dataset is opened there: pass the Open() call itself).
[[noreturn]] inline void ReadWhileTruncating(
    absl::StatusOr<std::shared_ptr<const Dataset>> dataset,
    const std::string& path, off_t file_bytes,
    const TruncationOptions& options = {}) {
  if (!dataset.ok()) std::_Exit(3);
  const Dataset& ds = **dataset;
  absl::StatusOr<BatchLayout> batch = BatchLayout::Create(ds.layout(), 1);
  if (!batch.ok()) std::_Exit(3);
  std::vector<std::byte> slot(batch->slot_bytes());
  SampleView view(*batch, slot.data(), 0, 0);
  std::atomic<bool> done{false};
  std::thread truncator([&] {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    while (!done.load()) {
      if (::ftruncate(fd, 0) != 0) std::_Exit(4);
      std::this_thread::sleep_for(options.pause);
      if (::ftruncate(fd, file_bytes) != 0) std::_Exit(4);
      std::this_thread::sleep_for(options.pause);
    }
    ::close(fd);
  });
  const int64_t size = ds.size();
  int64_t data_loss = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (int64_t i = 0; std::chrono::steady_clock::now() < end; ++i) {
    const absl::Status status = ds.Read((i * options.stride) % size, view);
    if (status.code() == absl::StatusCode::kDataLoss) {
      ++data_loss;
    } else if (!status.ok()) {
      std::_Exit(2);
    }
  }
  done.store(true);
  truncator.join();
  std::fprintf(stderr, "%lld reads were DataLoss\n",
               static_cast<long long>(data_loss));
  std::_Exit(0);
}

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_READ_WHILE_TRUNCATING_H_
