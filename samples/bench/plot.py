#!/usr/bin/env python3
"""Plots pinwheel_bench's W1 results: GB/s against worker count.

Reads the JSON lines that `pinwheel_bench --json=FILE` writes and draws, as
a hand-written SVG (standard library only), one line of pinwheel GB/s per
prefetch depth (and store kind: memcpy, or ":nt" streaming stores) against
the number of workers, with the raw pinned copy limit measured in the same
run as a horizontal line (and the issue's 80% goal, the pageable copy and the
naive loader as dashed lines when present). Each point is a row's median
over its repetitions (the "row" lines), with a bar from its min to its max
when the row was repeated.

Example:
  python3 samples/bench/plot.py bench.jsonl -o w1_workers.svg

Every line of the input must be valid JSON: the smoke test relies on that.
"""

import argparse
import html
import json
import sys

WIDTH, HEIGHT = 760, 460
LEFT, RIGHT, TOP, BOTTOM = 70, 200, 56, 60
SERIES_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                  "#e377c2", "#17becf"]


def read_lines(path):
    """Returns the JSON objects of `path`, one a line; exits on bad JSON."""
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{number}: not valid JSON: {e}")
    return records


def nice_ceiling(value):
    """Returns a round number >= value for the top of the y axis."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1) if value >= 1 else 0.1
    while magnitude > value:
        magnitude /= 10
    for step in (1, 2, 2.5, 5, 10):
        top = step * magnitude
        while top < value:
            top += step * magnitude
        if top / value < 1.35:
            return top
    return value * 1.2


def text(x, y, s, size=12, anchor="start", weight="normal", colour="#222"):
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" '
            f'text-anchor="{anchor}" font-weight="{weight}" fill="{colour}" '
            f'font-family="sans-serif">{html.escape(str(s))}</text>')


def plot(records, title_suffix=""):
    run = next((r for r in records if r.get("kind") == "run"), {})
    rows = [r for r in records
            if r.get("kind") == "row" and r.get("workload") == "w1"
            and not r.get("skipped")]
    pinwheel = [r for r in rows if r.get("method") == "pinwheel"]
    by_prefetch = {}  # (prefetch, device buffers, stores) -> points
    for r in pinwheel:
        key = (r["prefetch"], r.get("device_buffers", 2), r.get("stores", ""))
        gbps = r["gbps"] or 0.0
        by_prefetch.setdefault(key, []).append(
            (r["workers"], gbps, r.get("gbps_min", gbps) or gbps,
             r.get("gbps_max", gbps) or gbps))
    references = []  # (label, GB/s, colour, dash)
    raw = next((r for r in rows if r.get("method") == "raw_pinned"), None)
    if raw:
        references.append(("raw pinned limit", raw["gbps"], "#d62728", ""))
        references.append(("80% of raw (goal)", 0.8 * raw["gbps"], "#d62728",
                           "6,4"))
    for method, label, colour in (("pageable", "pageable cudaMemcpy", "#7f7f7f"),
                                  ("naive", "naive pin-per-batch", "#000000")):
        row = next((r for r in rows if r.get("method") == method), None)
        if row:
            references.append((label, row["gbps"], colour, "2,4"))

    workers = sorted({p[0] for points in by_prefetch.values() for p in points})
    x_max = max(workers) if workers else 1
    y_values = [p[3] for points in by_prefetch.values() for p in points]
    y_values += [g for _, g, _, _ in references]
    y_top = nice_ceiling(max(y_values) if y_values else 1.0)

    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM

    def sx(w):
        return LEFT + (w / x_max) * plot_w if x_max > 0 else LEFT

    def sy(g):
        return TOP + plot_h - (g / y_top) * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
           f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    title = "W1 images (256 x u8[3,224,224]): pinwheel GB/s vs workers"
    if run.get("smoke"):
        title = "W1 (SMOKE sizes, timings meaningless): GB/s vs workers"
    out.append(text(LEFT, 22, title + title_suffix, size=15, weight="bold"))
    repeat = run.get("repeat")
    spread = (f"median of {repeat} runs, bars min-max" if repeat and repeat > 1
              else None)
    subtitle = " · ".join(s for s in (run.get("device_description"),
                                      run.get("date"), spread) if s)
    out.append(text(LEFT, 40, subtitle, size=11, colour="#555"))

    # Axes, grid and ticks.
    for i in range(6):
        g = y_top * i / 5
        y = sy(g)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" '
                   f'y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(text(LEFT - 8, y + 4, f"{g:g}", size=11, anchor="end"))
    for w in workers:
        x = sx(w)
        out.append(f'<line x1="{x:.1f}" y1="{TOP + plot_h}" x2="{x:.1f}" '
                   f'y2="{TOP + plot_h + 5}" stroke="#222"/>')
        out.append(text(x, TOP + plot_h + 19, w, size=11, anchor="middle"))
    out.append(f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" '
               f'y2="{TOP + plot_h}" stroke="#222"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" '
               f'y2="{TOP + plot_h}" stroke="#222"/>')
    out.append(text(LEFT + plot_w / 2, HEIGHT - 18, "worker threads",
                    size=12, anchor="middle"))
    out.append(f'<text x="18" y="{TOP + plot_h / 2:.1f}" font-size="12" '
               f'text-anchor="middle" font-family="sans-serif" '
               f'transform="rotate(-90 18 {TOP + plot_h / 2:.1f})">'
               f'GB/s (1e9 bytes/s)</text>')

    legend_y = TOP + 6
    legend_x = LEFT + plot_w + 16

    def legend(label, colour, dash="", marker=False):
        nonlocal legend_y
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{legend_x}" y1="{legend_y}" '
                   f'x2="{legend_x + 24}" y2="{legend_y}" stroke="{colour}" '
                   f'stroke-width="2"{dash_attr}/>')
        if marker:
            out.append(f'<circle cx="{legend_x + 12}" cy="{legend_y}" r="3.5" '
                       f'fill="{colour}"/>')
        out.append(text(legend_x + 30, legend_y + 4, label, size=11))
        legend_y += 18

    for label, gbps, colour, dash in references:
        y = sy(gbps)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" '
                   f'y2="{y:.1f}" stroke="{colour}" stroke-width="1.5"'
                   f'{dash_attr}/>')
        legend(f"{label} {gbps:.1f}", colour, dash)

    for i, key in enumerate(sorted(by_prefetch)):
        prefetch, buffers, stores = key
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        dash = ' stroke-dasharray="5,3"' if stores else ""
        points = sorted(by_prefetch[key])
        path = " ".join(f"{sx(w):.1f},{sy(g):.1f}" for w, g, _, _ in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')
        name = f"prefetch {prefetch}"
        if buffers != 2:
            name += f", {buffers} dev bufs"
        if stores:
            name += f", {stores} stores"
        for w, g, lo, hi in points:
            if hi > lo:
                out.append(f'<line x1="{sx(w):.1f}" y1="{sy(lo):.1f}" '
                           f'x2="{sx(w):.1f}" y2="{sy(hi):.1f}" '
                           f'stroke="{colour}" stroke-width="1.5"/>')
            out.append(f'<circle cx="{sx(w):.1f}" cy="{sy(g):.1f}" r="3.5" '
                       f'fill="{colour}"><title>{w} workers, {name}: '
                       f'{g:.2f} GB/s ({lo:.2f}-{hi:.2f})</title></circle>')
        legend(f"pinwheel, {name}", colour, marker=True)

    if not references:
        legend_y += 6
        out.append(text(legend_x, legend_y, "raw limit not measured",
                        size=11, colour="#a00"))
        out.append(text(legend_x, legend_y + 14, "(host backend)", size=11,
                        colour="#a00"))
    if not pinwheel:
        out.append(text(LEFT + plot_w / 2, TOP + plot_h / 2,
                        "no W1 pinwheel rows in the input", size=14,
                        anchor="middle", colour="#a00"))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jsonl", help="pinwheel_bench --json output")
    parser.add_argument("-o", "--output", required=True, help="SVG to write")
    args = parser.parse_args()
    records = read_lines(args.jsonl)
    if not any(r.get("kind") == "run" for r in records):
        sys.exit(f"{args.jsonl}: no 'run' line: not pinwheel_bench output")
    svg = plot(records)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(svg)
    rows = sum(1 for r in records if r.get("kind") == "row")
    print(f"{args.output}: W1 plot from {rows} rows of {args.jsonl}")


if __name__ == "__main__":
    main()
