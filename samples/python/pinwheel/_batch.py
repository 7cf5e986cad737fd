"""How a Batch iterates: as the read-only mapping it is (field names, like
a dict), except where Python unpacks it. ``for x, y in loader`` over a
two-field dataset would bind the field names "x" and "y" to x and y; a
DataLoader user means the tensors. Unpacking a Batch (``x, y = batch``,
``x, *rest = batch``, ``for x, y in loader``) raises TypeError saying how:
``x, y = batch.values()`` or ``batch["x"]``. Iterating it in any other way
(``for name in batch``, ``list(batch)``, ``dict(batch)``) gives the names."""
from __future__ import annotations

import dis
import sys
from typing import Any, Iterator

# The instructions that unpack an iterable into names (CPython).
_UNPACK = frozenset(dis.opmap[name] for name in ("UNPACK_SEQUENCE", "UNPACK_EX")
                    if name in dis.opmap)


def _unpacking(frame: Any) -> bool:
    """Whether `frame` is executing an unpacking instruction: the caller of
    __iter__ when Python unpacks the Batch."""
    code = frame.f_code.co_code
    at = frame.f_lasti
    return 0 <= at < len(code) and code[at] in _UNPACK


def iterate(batch: Any) -> Iterator[str]:
    """Batch.__iter__: the field names, or TypeError when unpacking."""
    frame = sys._getframe(1)
    try:
        unpacking = _unpacking(frame)
    finally:
        del frame
    names = list(batch.keys())
    if unpacking:
        values = ", ".join(names)
        raise TypeError(
            f"Batch: a batch is a mapping of field name to tensor; unpacking it would bind "
            f"the field names {names!r}, not the data. Unpack its values (field order): "
            f"`{values} = batch.values()`, or take each by name: batch[{names[0]!r}]"
            if names else "Batch: a batch with no fields cannot be unpacked")
    return iter(names)
