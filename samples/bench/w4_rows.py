"""What w4_vs_dali.py and w4_cpu_vs_dataloader.py share: one repetition of
pinwheel_w4_decode's row, parsed, and the median [min-max] of a row's
repetitions."""

from __future__ import annotations

import re
import statistics
import subprocess

# pinwheel_w4_decode's row (samples/bench/w4_decode.cc, FormatW4DecodeRow).
_ROW = re.compile(r"w4 decode=(\w+) workers=(\d+) batch=(\d+): (\d+) img/s, "
                  r"([\d.]+) cores")
_STEP = re.compile(r"; step ([\d.]+) ms against ([\d.]+) ms alone")


def w4_decode_row(binary: str, root: str, decode: str, workers: int,
                  batches: int, *flags: str):
    """Runs pinwheel_w4_decode once (--repeat=1) with `flags` added and
    returns (img/s, cores, step overhead over the step alone or None)."""
    out = subprocess.run(
        [binary, f"--root={root}", f"--decode={decode}",
         f"--workers={workers}", f"--batches={batches}", "--repeat=1",
         *flags],
        check=True, capture_output=True, text=True).stdout
    m = _ROW.search(out)
    if m is None or m.group(1) != decode:
        raise RuntimeError(
            f"pinwheel_w4_decode printed no {decode} row:\n{out}")
    step = _STEP.search(out)
    overhead = None
    if step is not None:
        overhead = float(step.group(1)) / float(step.group(2)) - 1
    return float(m.group(4)), float(m.group(5)), overhead


def median_range(values) -> tuple[float, float, float]:
    """(median, min, max) of a row's repetitions."""
    values = list(values)
    return statistics.median(values), min(values), max(values)
