"""Exceptions raised by pinwheel, one per absl::Status code.

Every class derives from :class:`pinwheel.Error` (a ``RuntimeError``) and,
where one fits, from the built-in exception Python code already catches:
``except ValueError`` catches a bad option, ``except FileNotFoundError`` a
missing file, ``except TimeoutError`` a batch that did not come in time.

``.code`` is the Status code's name (``"INVALID_ARGUMENT"``); ``.index`` the
dataset index a failed read names (else ``None``); ``.worker`` the worker a
failed ``worker_init`` names (else ``None``). A failure of a Python
dataset's ``read()`` or of ``worker_init`` carries the original exception
as ``__cause__``. Messages are always printable text: bytes of a file name
that are not UTF-8 appear as ``\\xNN`` escapes.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = [
    "Error",
    "CancelledError",
    "UnknownError",
    "InvalidArgumentError",
    "DeadlineExceededError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "AbortedError",
    "OutOfRangeError",
    "UnimplementedError",
    "InternalError",
    "UnavailableError",
    "DataLossError",
]


class Error(RuntimeError):
    """Base class of every pinwheel error."""

    code: str = "UNKNOWN"
    index: Optional[int] = None
    worker: Optional[int] = None


class CancelledError(Error):
    """The loader was closed or shut down (Status CANCELLED)."""

    code = "CANCELLED"


class UnknownError(Error):
    code = "UNKNOWN"


class InvalidArgumentError(Error, ValueError):
    """A bad option or argument (Status INVALID_ARGUMENT)."""

    code = "INVALID_ARGUMENT"


class DeadlineExceededError(Error, TimeoutError):
    """A batch did not come within the loader's timeout."""

    code = "DEADLINE_EXCEEDED"


class NotFoundError(Error, FileNotFoundError):
    """A missing file or field (Status NOT_FOUND)."""

    code = "NOT_FOUND"


class AlreadyExistsError(Error):
    code = "ALREADY_EXISTS"


class PermissionDeniedError(Error, PermissionError):
    code = "PERMISSION_DENIED"


class ResourceExhaustedError(Error, MemoryError):
    """Memory (pinned or device) could not be allocated."""

    code = "RESOURCE_EXHAUSTED"


class FailedPreconditionError(Error):
    """The call is not valid now: e.g. a released batch was indexed, or the
    consumer holds every device buffer."""

    code = "FAILED_PRECONDITION"


class AbortedError(Error):
    code = "ABORTED"


class OutOfRangeError(Error, IndexError):
    code = "OUT_OF_RANGE"


class UnimplementedError(Error, NotImplementedError):
    code = "UNIMPLEMENTED"


class InternalError(Error):
    code = "INTERNAL"


class UnavailableError(Error, OSError):
    code = "UNAVAILABLE"


class DataLossError(Error, OSError):
    """A corrupt or truncated file (Status DATA_LOSS)."""

    code = "DATA_LOSS"


# absl::StatusCode values (the gRPC codes).
_BY_CODE = {
    1: CancelledError,
    2: UnknownError,
    3: InvalidArgumentError,
    4: DeadlineExceededError,
    5: NotFoundError,
    6: AlreadyExistsError,
    7: PermissionDeniedError,
    8: ResourceExhaustedError,
    9: FailedPreconditionError,
    10: AbortedError,
    11: OutOfRangeError,
    12: UnimplementedError,
    13: InternalError,
    14: UnavailableError,
    15: DataLossError,
}

_INDEX = re.compile(r"for index (-?\d+)")
_WORKER = re.compile(r"worker_init failed for worker (\d+)")


def _from_status(code: int, message: str) -> Error:
    """Returns the exception for a failed absl::Status (used by the extension)."""
    cls = _BY_CODE.get(code, UnknownError)
    error = cls(message)
    match = _INDEX.search(message)
    error.index = int(match.group(1)) if match else None
    match = _WORKER.search(message)
    error.worker = int(match.group(1)) if match else None
    return error
