"""Plot of the overlap benchmark: GEMM slowdown, collective busbw while
overlapped, and the batch's makespan against native NCCL's, per
configuration, for each collective.  Reads the "CSV," lines nccl_overlap
prints, from one file or several (the 128 MiB batches and the README's
1 GiB ones); writes one PNG.  matplotlib: Debian's python3-matplotlib.

Usage: python3 scripts/plot_overlap.py overlap.txt [overlap-1g.txt ...] overlap.png"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            if not line.startswith("CSV,"):
                continue
            # A CTA count may follow (newer runs).
            fields = line.strip().split(",")
            _, op, size, reg, cfg, g_a, g_o, bw_a, bw_o, span, err = fields[:11]
            ctas = fields[11] if len(fields) > 11 else ""
            # 1: registered, +2: ncclMemAlloc (cuMem) buffers.
            kind = int(reg)
            rows.append({
                "case": "%s%s%s %d MiB" % (op, " reg" if kind & 1 else "",
                                           " cuMem" if kind & 2 else "", int(size) >> 20),
                "config": cfg,
                "ctas": ctas,
                "slowdown": float(g_a) / float(g_o) if float(g_o) > 0 else 0.0,
                "busbw": float(bw_o),
                "span": float(span),
                "size": int(size),
            })
    return rows


def label_repeats(rows):
    """A configuration run twice for one case (another CTA count) is told
    apart by its CTAs."""
    seen = {}
    for r in rows:
        key = (r["case"], r["config"])
        seen[key] = seen.get(key, 0) + 1
    for r in rows:
        if seen[(r["case"], r["config"])] > 1 and r["ctas"]:
            r["config"] += " " + r["ctas"]


def native_span(rows, case):
    """The makespan of native NCCL's run of `case` (same invocation)."""
    for r in rows:
        if r["case"] == case and r["config"] == "native" and r["span"] > 0:
            return r["span"]
    return 0.0


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rows = []
    for path in sys.argv[1:-1]:
        rows += read(path)
    if not rows:
        sys.exit("no CSV lines in " + " ".join(sys.argv[1:-1]))
    label_repeats(rows)
    cases = sorted({r["case"] for r in rows}, key=lambda c: ([x["size"] for x in rows
                                                               if x["case"] == c][0], c))
    configs = sorted({r["config"] for r in rows})
    width = 0.8 / len(configs)
    fig, axes = plt.subplots(3, 1, figsize=(max(8, 1.4 * len(cases)), 12))
    for k, cfg in enumerate(configs):
        xs, slow, bw, span = [], [], [], []
        for i, case in enumerate(cases):
            r = [x for x in rows if x["case"] == case and x["config"] == cfg]
            if r:
                base = native_span(rows, case)
                xs.append(i + k * width)
                slow.append(r[0]["slowdown"])
                bw.append(r[0]["busbw"])
                span.append(r[0]["span"] / base if base else 0.0)
        axes[0].bar(xs, slow, width, label=cfg)
        axes[1].bar(xs, bw, width, label=cfg)
        axes[2].bar(xs, span, width, label=cfg)
    for ax in axes:
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))])
        ax.set_xticklabels(cases, rotation=20)
        ax.legend()
    axes[0].set_ylabel("GEMM time overlapped / alone")
    axes[0].axhline(1.0, color="black", linewidth=0.5)
    axes[1].set_ylabel("collective busbw overlapped (GB/s)")
    axes[2].set_ylabel("makespan / native NCCL's")
    axes[2].axhline(1.0, color="black", linewidth=0.5)
    axes[2].axhline(0.85, color="grey", linewidth=0.5, linestyle="--")
    fig.suptitle("GEMM + collective overlap (bf16 8192^3 GEMMs beside each collective)")
    fig.tight_layout()
    fig.savefig(sys.argv[-1], dpi=120)


if __name__ == "__main__":
    main()
