"""The package's one way of checking an argument: a wrong type is a
TypeError and a wrong value an InvalidArgumentError (a ValueError), each
naming the owner ("Loader", "TokenWindows", ...), the argument and its rule,
instead of nanobind's signature dump. Also the torch spellings the Loader
takes (a ``torch.device``) and the DataLoader arguments it refuses with the
name of pinwheel's equivalent."""
from __future__ import annotations

import json
import numbers
import os
from typing import Any, Mapping, Optional

from .errors import InvalidArgumentError

# Bounds spelled as a user would write them.
_SPELLED = {2**63 - 1: "2**63-1", 2**64 - 1: "2**64-1"}


def checked_int(owner: str, name: str, value: Any, low: int, high: Optional[int] = None, *,
                limit: int = 2**63 - 1) -> int:
    """Returns `value` (an int or numpy integer, not a bool) as an int in
    low..high (high None: no upper bound but `limit`, what the extension's C
    type holds), or raises TypeError (not an int) or InvalidArgumentError
    (out of range) naming `owner`, `name` and the rule."""
    rule = (f"an int >= {low}" if high is None
            else f"an int in {low}..{_SPELLED.get(high, high)}")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be {rule}, got {value!r} "
                        f"({type(value).__name__})")
    value = int(value)
    if value < low or (high is not None and value > high):
        raise InvalidArgumentError(f"{owner}: {name} = {value}: must be {rule}")
    if value > limit:
        raise InvalidArgumentError(f"{owner}: {name} = {value}: must be {rule}, at most {limit}")
    return value


# LoaderOptions::kAuto: num_workers / prefetch sized at run time.
AUTO = -2


def checked_int_or_auto(owner: str, name: str, value: Any, low: int, high: int) -> int:
    """Returns `value` as checked_int() does, or AUTO for the string "auto";
    raises TypeError naming `owner` and `name` for any other string or type
    (as checked_int() does, the rule followed by 'or "auto"'), and
    InvalidArgumentError for an int out of range."""
    if isinstance(value, str) and value == "auto":
        return AUTO
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be an int in {low}..{high}, got {value!r} "
                        f"({type(value).__name__}), or \"auto\"")
    return checked_int(owner, name, value, low, high)


def checked_bool(owner: str, name: str, value: Any) -> bool:
    """Returns `value` (a bool or numpy bool) as a bool, or raises TypeError
    naming `owner` and `name`."""
    if isinstance(value, bool):
        return value
    import numpy as np

    if isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"{owner}: {name} must be a bool, got {value!r} ({type(value).__name__})")


def _is_torch_device(value: Any) -> bool:
    # Without importing torch: a user who passes one has it imported.
    kind = type(value)
    return kind.__name__ == "device" and kind.__module__ == "torch"


def checked_device(owner: str, value: Any, what: str) -> str:
    """Returns the device spelling of `value`: a str as given, a
    ``torch.device`` as its str ("cuda", "cuda:1", "cpu"); anything else is
    a TypeError naming `owner` and the spellings (`what`)."""
    if isinstance(value, str):
        return value
    if _is_torch_device(value):
        return str(value)
    raise TypeError(f"{owner}: device must be a str ({what}) or a torch.device, got "
                    f"{value!r} ({type(value).__name__})")


# torch.utils.data.DataLoader's arguments that pinwheel.Loader does not take,
# and what to write instead. (batch_size, shuffle, sampler, num_workers,
# pin_memory, drop_last, timeout and in_order it takes under those names.)
DATALOADER_EQUIVALENTS: Mapping[str, str] = {
    "prefetch_factor": "prefetch= (the pinned batches read ahead in all, not per worker)",
    "worker_init_fn": "worker_init= (called with the worker number on each reader thread)",
    "collate_fn": "nothing: the dataset writes each sample into its place in the batch, "
                  "laid out by its fields; transform after next(), or on the device with "
                  "device_transform=",
    "persistent_workers": "nothing: the reader threads persist across epochs until close()",
    "batch_sampler": "sampler= (a pinwheel.Sampler orders the samples; batch_size= and "
                     "drop_last= cut them into batches)",
    "generator": "seed= (the order is a pure function of seed, epoch and position)",
    "multiprocessing_context": "nothing: the workers are threads of this process "
                               "(num_workers=)",
    "pin_memory_device": "device= (the batches land on that device)",
}


def refuse_dataloader_arguments(owner: str, extra: Mapping[str, Any]) -> None:
    """Raises TypeError for the first keyword in `extra`: for a DataLoader
    argument, naming pinwheel's equivalent; for any other, as Python does for
    an unexpected keyword."""
    for name in extra:
        if name in DATALOADER_EQUIVALENTS:
            raise TypeError(f"{owner}: {name} is torch DataLoader's; pinwheel's equivalent is "
                            f"{DATALOADER_EQUIVALENTS[name]}")
        raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}")


def stats_report_arguments(every: Any, every_batches: Any, callback: Any,
                           path: Any) -> dict:
    """The extension's stats_* arguments from the Loader's stats_every (a
    number of seconds or None), stats_every_batches, stats_callback (called
    with each report parsed into a dict) and stats_path. The rules (an
    interval needs a sink and the reverse, > 0) are the C++ builder's."""
    if every is not None:
        if isinstance(every, bool) or not isinstance(every, numbers.Real):
            raise TypeError(f"Loader: stats_every must be a number of seconds (or None), "
                            f"got {every!r} ({type(every).__name__})")
        every = float(every)
    every_batches = checked_int("Loader", "stats_every_batches", every_batches, 0)
    if callback is not None and not callable(callback):
        raise TypeError(f"Loader: stats_callback must be callable (or None), got "
                        f"{callback!r} ({type(callback).__name__})")
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"Loader: stats_path must be a str or os.PathLike (or None), "
                            f"got {path!r} ({type(path).__name__})")
        path = os.fspath(path)
    wrapped = None
    if callback is not None:
        def wrapped(line: str, user=callback) -> None:
            user(json.loads(line))
    return {"stats_every": every, "stats_every_batches": every_batches,
            "stats_callback": wrapped, "stats_path": path or ""}
