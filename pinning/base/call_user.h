// The one way the library calls user code (a Dataset's Read or Gather, a
// GatherSource's key, an IterableDataset's OpenShard, a SampleStream, a
// DeviceTransform, worker_init): through CallUser(), so that whatever it
// throws becomes a Status naming the call instead of escaping a public
// function that promises a Status.
//
// Example:
//   absl::Status status =
//       CallUser("Read", [&] { return dataset.Read(index, view); });
//
// Thread-safe (no state).
#ifndef PINWHEEL_PINNING_BASE_CALL_USER_H_
#define PINWHEEL_PINNING_BASE_CALL_USER_H_

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pinwheel::internal {

// Returns what the exception being handled says, as an Internal Status
// naming `call`. REQUIRES: called inside a catch block.
inline absl::Status Thrown(absl::string_view call) {
  try {
    throw;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(call, " threw ", e.what()));
  } catch (...) {
    return absl::InternalError(
        absl::StrCat(call, " threw a non-standard exception"));
  }
}

// Returns call() (an absl::Status or absl::StatusOr), or, when it throws, an
// Internal Status naming `name` and what was thrown.
template <typename Call>
auto CallUser(absl::string_view name, Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (...) {
    return Thrown(name);
  }
}

}  // namespace pinwheel::internal

#endif  // PINWHEEL_PINNING_BASE_CALL_USER_H_
