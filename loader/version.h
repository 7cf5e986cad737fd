// The version of pinwheel, for code that must tell releases apart: the one
// place it is written (the top-level CMakeLists.txt reads it for project()
// and the installed pinwheelConfigVersion.cmake; the Python package reports
// it as pinwheel.__version__). Breaking changes and their migration are
// listed in CHANGELOG.md.
//
// Example:
//   #include "pinwheel/pinwheel.h"  // or "pinwheel/loader/version.h"
//   #if PINWHEEL_VERSION >= PINWHEEL_VERSION_OF(0, 2, 0)
//   ... code for 0.2 and later ...
//   #endif
#ifndef PINWHEEL_LOADER_VERSION_H_
#define PINWHEEL_LOADER_VERSION_H_

#define PINWHEEL_VERSION_MAJOR 0
#define PINWHEEL_VERSION_MINOR 2
#define PINWHEEL_VERSION_PATCH 0
// "MAJOR.MINOR.PATCH", the same numbers as text.
#define PINWHEEL_VERSION_STRING "0.2.0"

// Returns the comparable number of a version: 0.2.0 is 200, 1.3.12 10312.
#define PINWHEEL_VERSION_OF(major, minor, patch) \
  ((major)*10000 + (minor)*100 + (patch))
// This version's comparable number.
#define PINWHEEL_VERSION                                              \
  PINWHEEL_VERSION_OF(PINWHEEL_VERSION_MAJOR, PINWHEEL_VERSION_MINOR, \
                      PINWHEEL_VERSION_PATCH)

#endif  // PINWHEEL_LOADER_VERSION_H_
