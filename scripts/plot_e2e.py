#!/usr/bin/env python3
"""Plot of the end-to-end training benchmark (bench/results/e2e.json):
median step time per workload and mode (native, plugin, plugin with
NCCL_PASS_SM=1), the p90 as a whisker, one panel per GPU count.  Posed
rows (two processes on one GPU) are drawn but titled as what they are:
timings that mean nothing.  matplotlib: Debian's python3-matplotlib.

Usage: python3 scripts/plot_e2e.py bench/results/e2e.json e2e.png"""
import sys

import plot_common

MODES = (("native", "native"), ("plugin", "plugin"), ("pass_sm", "plugin, NCCL_PASS_SM=1"))
ORDER = ("ddp", "fsdp", "tp", "moe")


def panels(rows):
    """[(title, [(workload, {mode: (median, p90)})])], one per GPU count,
    fewest GPUs first, workloads in ORDER (others after, by name)."""
    by_gpus = {}
    for r in rows:
        if "workload" not in r:
            continue
        times = {m: (r.get(f"{m}_ms"), r.get(f"{m}_p90_ms")) for m, _ in MODES}
        by_gpus.setdefault((int(r["gpus"]), bool(r.get("posed"))), []).append((r["workload"], times))
    out = []
    for (gpus, posed), bars in sorted(by_gpus.items()):
        bars.sort(key=lambda b: (ORDER.index(b[0]) if b[0] in ORDER else len(ORDER), b[0]))
        title = (f"{gpus} GPU, 2 processes posed as hosts: timings meaningless" if posed
                 else f"{gpus} GPUs")
        out.append((title, bars))
    return out


def draw(plots, path):
    plt = plot_common.pyplot()
    fig, axes = plt.subplots(1, len(plots), figsize=(5.5 * len(plots), 4.2), squeeze=False)
    width = 0.8 / len(MODES)
    for ax, (title, bars) in zip(axes[0], plots):
        for k, (mode, label) in enumerate(MODES):
            xs, med, lo, hi = [], [], [], []
            for i, (_, times) in enumerate(bars):
                m, p90 = times[mode]
                if m is None:
                    continue
                xs.append(i + (k - 1) * width)
                med.append(m)
                lo.append(0)
                hi.append(max(0.0, (p90 if p90 is not None else m) - m))
            ax.bar(xs, med, width, yerr=[lo, hi], capsize=2, label=label)
        ax.set_xticks(range(len(bars)))
        ax.set_xticklabels([w for w, _ in bars])
        ax.set_ylabel("step time, ms (median; whisker: p90)")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    plot_common.save(fig, path)


def summary(plots):
    return f"{sum(len(b) for _, b in plots)} workload(s) in {len(plots)} panel(s)"


if __name__ == "__main__":
    plot_common.main(sys.argv[1:], __doc__, panels, draw, "no end-to-end rows", summary)
