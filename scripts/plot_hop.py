#!/usr/bin/env python3
"""Plot of the hop benchmark (bench/results/hop.json): one-way time of the
host<->GPU ping-pong through the plugin, with landing words and with
events, against the bare driver's floors of the same invocation, one
panel per kernel beside it (none, another process, the copying one).
matplotlib: Debian's python3-matplotlib.

Usage: python3 scripts/plot_hop.py bench/results/hop.json hop.png"""
import sys

import plot_common

HOGS = ("none", "other", "self")
LINES = (("plugin_us", "landing-words", "plugin, landing words"),
         ("plugin_us", "events", "plugin, events"),
         ("floor_write_us", "landing-words", "floor: copy + stream write"),
         ("floor_write2d_us", "landing-words", "floor: 2D copy to GPU + stream write"),
         ("floor_event_us", "landing-words", "floor: copy + event"),
         ("floor_preposted_us", "landing-words", "floor: pre-posted"))


def load(rows):
    """{hog: {label: [(bytes, us)]}} from the ping-pong rows."""
    out = {}
    for r in rows:
        if r.get("mode") != "pingpong":
            continue
        for key, variant, label in LINES:
            if r.get("variant") == variant and key in r:
                out.setdefault(r["hog"], {}).setdefault(label, []).append(
                    (int(r["bytes"]), float(r[key])))
    for per in out.values():
        for pts in per.values():
            pts.sort()
    return out


def draw(data, path):
    plt = plot_common.pyplot()
    hogs = [h for h in HOGS if h in data]
    fig, axes = plt.subplots(1, len(hogs), figsize=(5 * len(hogs), 4), squeeze=False)
    for ax, hog in zip(axes[0], hogs):
        for label, pts in sorted(data[hog].items()):
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message bytes")
        ax.set_ylabel("one way, us (median)")
        ax.set_title({"none": "idle GPU", "other": "kernel on every SM, other process",
                      "self": "kernel on every SM, same process"}[hog], fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    plot_common.save(fig, path)


if __name__ == "__main__":
    plot_common.main(sys.argv[1:], __doc__, load, draw, "no ping-pong rows", plot_common.panels)
