#!/usr/bin/env bash
# House rules that clang-format cannot see, checked with the format check
# (.ci/run's first section). Exits non-zero naming file:line of each break.
#
# Locks go through pinning/base/mutex.h (MutexLock, AwaitWithDeadline), never
# absl::MutexLock, absl::ReaderMutexLock, absl::WriterMutexLock (nor
# MutexLockMaybe, ReleasableMutexLock) or absl::Condition directly: Debian's
# Abseil is not built with ThreadSanitizer, so TSan sees no happens-before
# edge inside absl::Mutex and a race behind a plain absl lock goes unreported
# (Note [ThreadSanitizer and the system libraries] in pinning/base/mutex.h,
# the one file allowed to use them). Prose after // is not code, so comments
# may name them.
#
# Usage: .ci/check-house-rules.sh  (from anywhere in the repository)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly allowed="pinning/base/mutex.h"
readonly pattern='absl::(MutexLock|MutexLockMaybe|ReleasableMutexLock|ReaderMutexLock|WriterMutexLock|Condition)\b'

files=()
# Tracked files and new ones git does not ignore (a file not yet added
# counts too); a tracked file deleted in the work tree is passed over.
while IFS= read -r file; do
  [[ -f "$file" && "$file" != "$allowed" ]] && files+=("$file")
done < <(git ls-files --cached --others --exclude-standard -- \
  'loader/*' 'pinning/*' 'transfer/*' 'samples/*' 'tests/*' |
  grep -E '\.(h|cc|cu)$' | sort -u)

# file:line: code of every use, each line's // comment left out first (awk
# prints the code of the lines naming absl::, grep keeps the uses).
found="$(awk '
  {
    code = $0
    sub(/\/\/.*/, "", code)
    if (index(code, "absl::")) printf "%s:%d: %s\n", FILENAME, FNR, code
  }' "${files[@]}" | grep -E "$pattern" || true)"

echo "house rules over ${#files[@]} files (absl locks only in $allowed)"
if [[ -n "$found" ]]; then
  echo "$found" | sed 's/^/  /' >&2
  echo "house rule: lock through pinning/base/mutex.h's MutexLock and AwaitWithDeadline," \
    "not absl's lock types or absl::Condition (TSan cannot see inside Debian's Abseil;" \
    "Note [ThreadSanitizer and the system libraries] in $allowed)" >&2
  exit 1
fi
