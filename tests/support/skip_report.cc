// Linked into every GoogleTest executable under tests/ (pinwheel_test() in
// tests/CMakeLists.txt): at the end of the run, one line with the counts of
// passed, failed and skipped cases, and "every case skipped" when no case
// ran, which ctest's SKIP_REGULAR_EXPRESSION turns into Skipped (ctest would
// otherwise call a suite that ran nothing Passed). With PINWHEEL_TEST_SKIP_DIR
// set (ctest sets it), also <dir>/<executable>.skipped: the counts and the
// skipped cases' names, which tests/skip_summary.cmake totals.
//
// Thread-compatible: gtest calls the listener from its main thread only.
#include <cstdio>
#include <cstdlib>
#include <errno.h>  // program_invocation_short_name (glibc)
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace {

class SkipReport : public testing::EmptyTestEventListener {
 public:
  void OnTestProgramEnd(const testing::UnitTest& unit) override {
    const int passed = unit.successful_test_count();
    const int failed = unit.failed_test_count();
    const int skipped = unit.skipped_test_count();
    std::printf("pinwheel-tests: %d passed, %d failed, %d skipped\n", passed,
                failed, skipped);
    // Only when nothing failed: a match makes ctest report Skipped whatever
    // the exit code.
    if (skipped > 0 && passed == 0 && failed == 0) {
      std::printf("pinwheel-tests: every case skipped\n");
    }
    std::fflush(stdout);
    const char* dir = std::getenv("PINWHEEL_TEST_SKIP_DIR");
    if (dir == nullptr || dir[0] == '\0') return;
    std::ofstream out(std::string(dir) + "/" + program_invocation_short_name +
                      ".skipped");
    out << passed << " " << failed << " " << skipped << "\n";
    for (int i = 0; i < unit.total_test_suite_count(); ++i) {
      const testing::TestSuite* suite = unit.GetTestSuite(i);
      for (int j = 0; j < suite->total_test_count(); ++j) {
        const testing::TestInfo* info = suite->GetTestInfo(j);
        if (info->should_run() && info->result()->Skipped()) {
          out << suite->name() << "." << info->name() << "\n";
        }
      }
    }
  }
};

[[maybe_unused]] const bool kRegistered = [] {
  testing::UnitTest::GetInstance()->listeners().Append(new SkipReport);
  return true;
}();

}  // namespace
