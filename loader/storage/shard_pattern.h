// ExpandShardPattern: a shard list from one brace pattern, as WebDataset
// and the shell write it:
//   "s3://b/shard-{000000..000099}.tar"  100 URLs, shard-000000 ... 000099
//   "data/{train,val}-{0..2}.tar"        6 paths, braces expanded left first
// A numeric range keeps the zero padding of its bounds (the wider one's
// width when either starts with 0). Thread-safe (a pure function).
#ifndef PINWHEEL_LOADER_STORAGE_SHARD_PATTERN_H_
#define PINWHEEL_LOADER_STORAGE_SHARD_PATTERN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pinwheel {

// Returns the expansion of `pattern` (the pattern itself when it has no
// braces), in order; InvalidArgument naming the pattern and the byte
// position of the fault: an unclosed '{', a stray '}', nested braces, an
// empty alternative list, a range whose bounds are not decimal integers or
// that runs backwards, or more than `max_names` names.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> ExpandShardPattern(
    absl::string_view pattern, size_t max_names = 10'000'000);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_STORAGE_SHARD_PATTERN_H_
