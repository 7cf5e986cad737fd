# ctest's python_tests when the Python package was not built (REASON, from
# skip_python in CMakeLists.txt): says why and is reported Skipped. Under
# PINWHEEL_REQUIRE_TORCH=1 (CI, .ci/run) it fails instead: the torch tests
# did not run, and a venv that failed to install must not pass as green.
if("$ENV{PINWHEEL_REQUIRE_TORCH}" STREQUAL "1")
  # (A plain message: FATAL_ERROR's text is wrapped.)
  message("python_tests failed: PINWHEEL_REQUIRE_TORCH=1 but the Python package was not built: ${REASON}")
  message(FATAL_ERROR "python_tests failed (above)")
endif()
# `cmake -P` exits 0; the SKIP_REGULAR_EXPRESSION of python_tests matches this.
message("python_tests skipped: ${REASON}")
