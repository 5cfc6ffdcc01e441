#!/usr/bin/env python3
"""Plot of the copy helper's own share of a hop (bench/results/helper-cpu.json,
test/mp/bench_helper_cpu.c): per copy of the stream, the helper's own work
and its driver calls (on the driver without GPU, its memmove), medians over
the runs, with landing words and with events.
matplotlib: Debian's python3-matplotlib.

Usage: python3 scripts/plot_helper_cpu.py bench/results/helper-cpu.json helper-cpu.png"""
import statistics
import sys

import plot_common


def load(rows):
    """{landing: {bytes: (own us, driver us per copy)}} from the stream rows."""
    runs = {}
    for r in rows:
        if r.get("mode") != "stream" or r.get("helper_own_us_per_copy", -1) < 0:
            continue
        driver = r["helper_work_us_per_copy"] - r["helper_own_us_per_copy"]
        runs.setdefault(r["landing_words"], {}).setdefault(int(r["bytes"]), []).append(
            (r["helper_own_us_per_copy"], driver))
    return {lw: {b: (statistics.median(o for o, _ in v), statistics.median(d for _, d in v))
                 for b, v in per.items()} for lw, per in runs.items()}


def draw(data, path):
    plt = plot_common.pyplot()
    fig, axes = plt.subplots(1, len(data), figsize=(5 * len(data), 4), squeeze=False)
    for ax, lw in zip(axes[0], sorted(data, reverse=True)):
        sizes = sorted(data[lw])
        names = ["%d B" % b if b < 1024 else "%d KiB" % (b // 1024) for b in sizes]
        own = [data[lw][b][0] for b in sizes]
        drv = [data[lw][b][1] for b in sizes]
        ax.bar(names, own, label="helper's own work")
        ax.bar(names, drv, bottom=own, label="driver calls (here: memmove)")
        ax.axhline(0.5, color="gray", linestyle="--", linewidth=1, label="0.5 us")
        ax.set_ylabel("us per copy (median of runs)")
        ax.set_xlabel("copy bytes (128 in flight)")
        ax.set_title("landing words" if lw else "events", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    plot_common.save(fig, path)


if __name__ == "__main__":
    plot_common.main(sys.argv[1:], __doc__, load, draw, "no stream rows", plot_common.panels)
