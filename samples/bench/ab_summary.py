"""Puts the summaries of pinwheel_bench runs of two builds side by side.

Reads the files samples/bench/ab_run.sh writes, ab-{old,new}-<round>.txt,
takes each round's median row (the "== summary" table) and prints, per row,
every round's value of both builds, then the median over rounds with its
range and new/old.

Usage: python3 samples/bench/ab_summary.py OUT/ab-*-*.txt
"""

import re
import statistics
import sys

ROW = re.compile(r"(pinwheel \S+|raw_pinned|compute_alone)\s+(\d+)\s+(\S+)\s+"
                 r"([\d,.]+) \[[^\]]*\]\s+(\S+)")


def read(paths):
    rows = {}
    for path in paths:
        name = re.search(r"ab-(old|new)-(\d+)\.txt$", path)
        if not name:
            continue
        which, rnd = name.group(1), int(name.group(2))
        text = open(path).read()
        if "== summary" not in text:
            print(f"{path}: no summary (the run failed?)", file=sys.stderr)
            continue
        workload = None
        for line in text[text.index("== summary"):].splitlines():
            head = re.match(r"(w\d\w*)\s", line)
            if head:
                workload = head.group(1)
            row = ROW.match(line)
            if row and workload:
                rate = float(row.group(4).replace(",", ""))
                rows.setdefault((workload, row.group(1)), {}).setdefault(
                    which, []).append((rnd, rate, row.group(5)))
    return rows


def main(paths):
    rows = read(paths)
    print("per round: batches/s (vs ref: over the run's own raw copy; w3: the "
          "step over compute alone)")
    for (workload, label), trees in sorted(rows.items()):
        for which in ("old", "new"):
            cells = " ".join(f"{r}:{rate:.0f}({ref})"
                             for r, rate, ref in sorted(trees.get(which, [])))
            print(f"{workload:4} {label:18} {which}  {cells}")
    print("\nmedian over rounds [min-max], batches/s")
    for (workload, label), trees in sorted(rows.items()):
        old = [rate for _, rate, _ in trees.get("old", [])]
        new = [rate for _, rate, _ in trees.get("new", [])]
        if not old or not new:
            continue
        mo, mn = statistics.median(old), statistics.median(new)
        print(f"{workload:4} {label:18} "
              f"old {mo:9.0f} [{min(old):.0f}-{max(old):.0f}] n={len(old)}  "
              f"new {mn:9.0f} [{min(new):.0f}-{max(new):.0f}] n={len(new)}  "
              f"new/old {mn / mo:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
