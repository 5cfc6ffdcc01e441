#!/usr/bin/env python3
"""Plot of the sweep (bench/results/sweep.json): the plugin's bus
bandwidth over native's against the message size, one panel per op, one
line per GPU count.  matplotlib: Debian's python3-matplotlib.

Usage: python3 scripts/plot_sweep.py bench/results/sweep.json sweep.png"""
import math
import sys

import plot_common


def series(rows):
    """{op: {gpus: [(bytes, ratio)] by size}}, rows without a ratio left out."""
    out = {}
    for r in rows:
        if "op" not in r or r.get("ratio") is None:
            continue
        out.setdefault(r["op"], {}).setdefault(int(r["gpus"]), []).append(
            (int(r["bytes"]), float(r["ratio"])))
    for per_gpus in out.values():
        for points in per_gpus.values():
            points.sort()
    return out


def size_label(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift:
            return f"{b / (1 << shift):g} {unit}"
    return f"{b} B"


def draw(data, path):
    plt = plot_common.pyplot()
    ops = sorted(data)
    cols = min(3, len(ops))
    rows = math.ceil(len(ops) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, op in zip(axes.flat, ops):
        for gpus, points in sorted(data[op].items()):
            ax.plot([b for b, _ in points], [r for _, r in points], marker="o", ms=3,
                    label=f"{gpus} GPUs")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ticks = sorted({b for points in data[op].values() for b, _ in points})
        ticks = ticks[::max(1, len(ticks) // 6)]
        ax.set_xticks(ticks)
        ax.set_xticklabels([size_label(b) for b in ticks], fontsize=7)
        ax.set_title(op)
        ax.set_ylabel("busbw plugin / native")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(ops):]:
        ax.set_visible(False)
    plot_common.save(fig, path)


if __name__ == "__main__":
    plot_common.main(sys.argv[1:], __doc__, series, draw, "no sweep rows with a ratio",
                     lambda data: f"{len(data)} op(s)")
