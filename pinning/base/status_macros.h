// Status propagation macros. Abseil 20220623 has no ABSL_RETURN_IF_ERROR,
// so pinwheel keeps these two small ones of its own.
#ifndef PINWHEEL_PINNING_BASE_STATUS_MACROS_H_
#define PINWHEEL_PINNING_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define PINWHEEL_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::absl::Status pinwheel_status_ = (expr);            \
    if (!pinwheel_status_.ok()) return pinwheel_status_; \
  } while (0)

#define PINWHEEL_STATUS_CONCAT_INNER_(a, b) a##b
#define PINWHEEL_STATUS_CONCAT_(a, b) PINWHEEL_STATUS_CONCAT_INNER_(a, b)

// Evaluates `rexpr` (an absl::StatusOr<T>); returns its status when not OK,
// else moves its value into `lhs` (a declaration or an lvalue).
#define PINWHEEL_ASSIGN_OR_RETURN(lhs, rexpr) \
  PINWHEEL_ASSIGN_OR_RETURN_IMPL_(            \
      PINWHEEL_STATUS_CONCAT_(pinwheel_statusor_, __LINE__), lhs, rexpr)
#define PINWHEEL_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                    \
  if (!statusor.ok()) return std::move(statusor).status();    \
  lhs = std::move(statusor).value()

#endif  // PINWHEEL_PINNING_BASE_STATUS_MACROS_H_
