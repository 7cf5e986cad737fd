// Deprecated: the status macros moved to pinning/base/status_macros.h
// ("pinwheel/pinning/base/status_macros.h" for an installed package) in
// pinwheel 0.2.0. This header only includes the new one, and is removed in
// 0.3.0: include the new path, or "pinwheel/pinwheel.h", which includes it.
// See CHANGELOG.md.
#ifndef PINWHEEL_PINNING_STATUS_MACROS_H_
#define PINWHEEL_PINNING_STATUS_MACROS_H_

#include "pinning/base/status_macros.h"

#endif  // PINWHEEL_PINNING_STATUS_MACROS_H_
