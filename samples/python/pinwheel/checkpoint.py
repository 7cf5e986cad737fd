"""Loader checkpoints from Python: the state dict ``Loader.state_dict()``
returns and ``Loader.load_state_dict()`` / ``Loader(..., resume=)`` take, and
the exceptions a refused checkpoint raises.

A state dict is a plain dict that ``torch.save`` / ``pickle`` / ``json``
(after base64) store as is::

    {"pinwheel_checkpoint": b"PWLDCKPT...",   # LoaderCheckpoint bytes (C++)
     "version": 1,                             # of this dict's layout
     "epoch": 3, "position": 4096,             # informational
     "world_size": 2, "rank": 0}               # informational

Only ``pinwheel_checkpoint`` and ``version`` are read back: the bytes are
the C++ ``LoaderCheckpoint`` (loader/loader_checkpoint.h): a few dozen
versioned, CRC-32C-checked bytes holding the data order (dataset size,
shuffle, seed) and where the consumer stands in it (epoch, position), never
a list of indices, so they do not grow with the dataset.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional, Union

from . import _pinwheel
from .errors import DataLossError, Error, InvalidArgumentError

__all__ = [
    "CheckpointError",
    "CheckpointMismatchError",
    "CorruptCheckpointError",
    "InvalidCheckpointError",
    "STATE_DICT_VERSION",
]

# The layout of the dict state_dict() returns (not the bytes' own version,
# which the bytes carry).
STATE_DICT_VERSION = 1
_KEY = "pinwheel_checkpoint"


class CheckpointError(Error):
    """A checkpoint was refused. ``.field`` names the field at fault (a
    state-dict key, a field of the checkpoint bytes, or the loader setting
    that differs), or None."""

    field: Optional[str] = None


class CheckpointMismatchError(CheckpointError, InvalidArgumentError):
    """The checkpoint is of another data order than this loader's: another
    dataset size, shuffle or seed (for an iterable dataset also another
    world size, rank or shard count). ``.field`` is the checkpoint field;
    the message gives the checkpoint's value and the loader's."""


class CorruptCheckpointError(CheckpointError, DataLossError):
    """The checkpoint bytes are truncated or damaged (length or CRC-32C
    checksum wrong)."""


class InvalidCheckpointError(CheckpointError, InvalidArgumentError):
    """Not a pinwheel loader checkpoint: another object, foreign bytes, a
    newer version, or a field out of range."""


_FIELD = re.compile(r"field '([^']+)'")


def _with_field(cls: type, message: str, field: Optional[str] = None) -> CheckpointError:
    error = cls(message)
    if field is None:
        match = _FIELD.search(message)
        field = match.group(1) if match else None
    error.field = field
    return error


def to_state_dict(checkpoint: bytes) -> Dict[str, Any]:
    """Returns the state dict of LoaderCheckpoint bytes."""
    info = _pinwheel._checkpoint_info(checkpoint)
    return {
        _KEY: bytes(checkpoint),
        "version": STATE_DICT_VERSION,
        "epoch": info["epoch"],
        "position": info["position"],
        "world_size": info["world_size"],
        "rank": info["rank"],
    }


def checkpoint_bytes(state: Union[Mapping[str, Any], bytes, bytearray, memoryview]) -> bytes:
    """Returns the LoaderCheckpoint bytes of a state dict (or the bytes
    themselves), checked: InvalidCheckpointError for anything that is not
    one, CorruptCheckpointError for damaged bytes, each naming the field."""
    if isinstance(state, (bytes, bytearray, memoryview)):
        data = bytes(state)
    elif isinstance(state, Mapping):
        if _KEY not in state:
            raise _with_field(
                InvalidCheckpointError,
                f"state dict has no '{_KEY}' key (keys: {sorted(map(str, state))}): "
                f"not from pinwheel.Loader.state_dict()", _KEY)
        version = state.get("version", STATE_DICT_VERSION)
        if not isinstance(version, int) or isinstance(version, bool) or not (
                1 <= version <= STATE_DICT_VERSION):
            raise _with_field(
                InvalidCheckpointError,
                f"state dict 'version' = {version!r}: this pinwheel reads versions "
                f"1..{STATE_DICT_VERSION}", "version")
        data = state[_KEY]
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise _with_field(
                InvalidCheckpointError,
                f"state dict '{_KEY}' is a {type(data).__name__}: must be bytes", _KEY)
        data = bytes(data)
    else:
        raise _with_field(
            InvalidCheckpointError,
            f"resume state is a {type(state).__name__}: expected the dict "
            f"Loader.state_dict() returns (or its '{_KEY}' bytes)", None)
    try:
        _pinwheel._checkpoint_info(data)
    except DataLossError as e:
        raise _with_field(CorruptCheckpointError, str(e)) from None
    except InvalidArgumentError as e:
        raise _with_field(InvalidCheckpointError, str(e)) from None
    return data


_MISMATCH = re.compile(r"^resume: checkpoint field '([^']+)'")


def refusal(error: Error) -> Error:
    """Returns CheckpointMismatchError for a loader's refusal of a
    checkpoint (InvalidArgumentError "resume: checkpoint field ..."), else
    `error` itself."""
    match = _MISMATCH.search(str(error))
    if isinstance(error, InvalidArgumentError) and match:
        return _with_field(CheckpointMismatchError, str(error), match.group(1))
    return error
