// pinwheel_w4_decode: W4's decode rows (samples/bench/w4_decode.h) for the
// given decode paths and worker counts.
//
// Usage: pinwheel_w4_decode --root=/tmp/w4 [--decode=cpu,gpu]
//                           [--workers=4,14] [--batches=40] [--repeat=3]
//                           [--compute_gemm_n=0 (no compute step)]
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

#include "samples/bench/w4_decode.h"

ABSL_FLAG(std::string, root, "", "an ImageFolder root of JPEGs");
ABSL_FLAG(std::string, decode, "cpu,gpu", "decode paths, comma-separated");
ABSL_FLAG(std::string, workers, "4,14", "worker counts, comma-separated");
ABSL_FLAG(int, batches, 40, "timed batches per row");
ABSL_FLAG(int, batch_size, 256, "images per batch");
ABSL_FLAG(int, repeat, 3, "repetitions of each row");
ABSL_FLAG(int, compute_gemm_n, 0,
          "> 0: two bf16 GEMMs of this side after each batch, and the step "
          "time against the GEMMs alone");
ABSL_FLAG(int, compute_sm_count, 0,
          "> 0: the GEMMs use at most this many SMs (cublasSetSmCountTarget)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  int status = 0;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_decode), ',')) {
    absl::StatusOr<pinwheel::ImageDecode> decode =
        pinwheel::ParseImageDecode(name);
    if (!decode.ok()) {
      std::fprintf(stderr, "%s\n", decode.status().ToString().c_str());
      return 2;
    }
    for (absl::string_view w :
         absl::StrSplit(absl::GetFlag(FLAGS_workers), ',')) {
      int workers = 0;
      if (!absl::SimpleAtoi(w, &workers)) {
        std::fprintf(stderr, "--workers: %s is not a number\n",
                     std::string(w).c_str());
        return 2;
      }
      for (int r = 0; r < absl::GetFlag(FLAGS_repeat); ++r) {
        absl::StatusOr<pinwheel::bench::W4DecodeRow> row =
            pinwheel::bench::MeasureW4Decode(
                {.root = absl::GetFlag(FLAGS_root),
                 .decode = *decode,
                 .workers = workers,
                 .batch_size = absl::GetFlag(FLAGS_batch_size),
                 .batches = absl::GetFlag(FLAGS_batches),
                 .compute_gemm_n = absl::GetFlag(FLAGS_compute_gemm_n),
                 .compute_sm_count = absl::GetFlag(FLAGS_compute_sm_count)});
        if (!row.ok()) {
          std::fprintf(stderr, "%s\n", row.status().ToString().c_str());
          status = 1;
          continue;
        }
        std::printf("%s\n", pinwheel::bench::FormatW4DecodeRow(*row).c_str());
        std::fflush(stdout);
      }
    }
  }
  return status;
}
