#include "loader/storage/shard_pattern.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace pinwheel {
namespace {

absl::Status Bad(absl::string_view pattern, size_t position,
                 absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "shard pattern \"", pattern, "\": ", what, " at position ", position));
}

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The alternatives of one brace group's inside (`body`, at `at`).
absl::StatusOr<std::vector<std::string>> Alternatives(absl::string_view pattern,
                                                      absl::string_view body,
                                                      size_t at,
                                                      size_t max_names) {
  const size_t dots = body.find("..");
  if (dots != absl::string_view::npos) {
    const absl::string_view first = body.substr(0, dots);
    const absl::string_view last = body.substr(dots + 2);
    uint64_t from = 0;
    uint64_t to = 0;
    if (!AllDigits(first) || !AllDigits(last) || first.size() > 18 ||
        last.size() > 18 || !absl::SimpleAtoi(first, &from) ||
        !absl::SimpleAtoi(last, &to)) {
      return Bad(
          pattern, at,
          absl::StrCat("the range {", body,
                       "} is not {<first>..<last>} of decimal integers"));
    }
    if (from > to) {
      return Bad(pattern, at,
                 absl::StrCat("the range {", body, "} runs backwards"));
    }
    if (to - from + 1 > max_names) {
      return Bad(pattern, at,
                 absl::StrCat("the range {", body, "} has more than ",
                              max_names, " names"));
    }
    const bool padded = (first.size() > 1 && first[0] == '0') ||
                        (last.size() > 1 && last[0] == '0');
    const int width =
        padded ? static_cast<int>(std::max(first.size(), last.size())) : 0;
    std::vector<std::string> out;
    out.reserve(to - from + 1);
    for (uint64_t i = from; i <= to; ++i) {
      out.push_back(absl::StrFormat("%0*d", width, i));
    }
    return out;
  }
  std::vector<std::string> out = absl::StrSplit(body, ',');
  if (body.empty()) return Bad(pattern, at, "an empty {}");
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandShardPattern(
    absl::string_view pattern, size_t max_names) {
  std::vector<std::string> names = {""};
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c == '}') return Bad(pattern, i, "a '}' without its '{'");
    if (c != '{') {
      const size_t next = pattern.find_first_of("{}", i);
      const absl::string_view literal = pattern.substr(
          i,
          next == absl::string_view::npos ? absl::string_view::npos : next - i);
      for (std::string& name : names) absl::StrAppend(&name, literal);
      i += literal.size();
      continue;
    }
    const size_t close = pattern.find_first_of("{}", i + 1);
    if (close == absl::string_view::npos || pattern[close] != '}') {
      return Bad(pattern, i,
                 close == absl::string_view::npos ? "a '{' without its '}'"
                                                  : "nested braces");
    }
    absl::StatusOr<std::vector<std::string>> alternatives = Alternatives(
        pattern, pattern.substr(i + 1, close - i - 1), i, max_names);
    if (!alternatives.ok()) return alternatives.status();
    if (names.size() * alternatives->size() > max_names) {
      return Bad(
          pattern, i,
          absl::StrCat("the expansion has more than ", max_names, " names"));
    }
    std::vector<std::string> expanded;
    expanded.reserve(names.size() * alternatives->size());
    for (const std::string& name : names) {
      for (const std::string& alternative : *alternatives) {
        expanded.push_back(absl::StrCat(name, alternative));
      }
    }
    names = std::move(expanded);
    i = close + 1;
  }
  return names;
}

}  // namespace pinwheel
