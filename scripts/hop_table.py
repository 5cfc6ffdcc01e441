#!/usr/bin/env python3
"""The hop benchmark's rows (test/mp/bench_hop.c, JSON lines) as a table:
per hog and variant, the plugin's one-way median against the best floor
of the same invocation, and the stream against the floor's copy rate.

    python3 scripts/hop_table.py hop.jsonl [--json OUT --commit C --gpu G --date D]

With --json the joined rows are written as bench/results/hop.json rows."""
import argparse
import json
import sys

FLOORS = ("event", "write", "write2d", "preposted")


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def join(rows):
    """Plugin rows with the floors of the same invocation (hog, variant)."""
    floors = {}
    for r in rows:
        if r["who"] == "floor" and "bytes" in r:
            floors[(r["path"], r["hog"], r.get("variant"), r["mode"], r.get("dir"),
                    r["bytes"])] = r
    out = []
    for r in rows:
        if r["who"] != "plugin":
            continue
        f = floors.get((r["path"], r["hog"], r.get("variant"), r["mode"], r.get("dir"),
                        r["bytes"]))
        j = dict(r)
        if f:
            j.update({k: v for k, v in f.items() if k.startswith("floor_")})
        if r["mode"] == "pingpong" and f:
            best = min(f["floor_%s_us" % k] for k in FLOORS if "floor_%s_us" % k in f)
            j["best_floor_us"] = best
            j["ratio_to_best_floor"] = round(r["plugin_us"] / best, 3)
            j["ratio_to_write_floor"] = round(r["plugin_us"] / f["floor_write_us"], 3)
        if r["mode"] == "stream" and f:
            j["ratio_to_floor_rate"] = round(r["plugin_copies_per_s"] / f["floor_copies_per_s"], 3)
        out.append(j)
    return out


def show(rows):
    print("%-6s %-14s %9s %9s %8s %8s %8s %10s %7s" % (
        "hog", "variant", "bytes", "plugin_us", "event", "write", "write2d", "preposted",
        "/best"))
    for r in rows:
        if r["mode"] != "pingpong":
            continue
        print("%-6s %-14s %9d %9.2f %8s %8s %8s %10s %7s" % (
            r["hog"], r.get("variant", ""), r["bytes"], r["plugin_us"],
            r.get("floor_event_us", "-"), r.get("floor_write_us", "-"),
            r.get("floor_write2d_us", "-"), r.get("floor_preposted_us", "-"),
            r.get("ratio_to_best_floor", "-")))
    # Each direction on its own (rows from before the split lack them).
    print("%-6s %-14s %9s %10s %10s %10s %10s" % ("hog", "variant", "bytes", "plugin h2g",
                                                 "write h2g", "plugin g2h", "write g2h"))
    for r in rows:
        if r["mode"] != "pingpong" or "plugin_h2g_us" not in r:
            continue
        print("%-6s %-14s %9d %10.2f %10s %10.2f %10s" % (
            r["hog"], r.get("variant", ""), r["bytes"], r["plugin_h2g_us"],
            r.get("floor_write_h2g_us", "-"), r["plugin_g2h_us"],
            r.get("floor_write_g2h_us", "-")))
    # us/copy: the sending helper's work per copy; calls/copy and us/call:
    # its copy-engine calls and their driver time; own: work less calls.
    print("%-6s %-14s %-12s %9s %12s %12s %7s %9s %10s %8s %7s" % (
        "hog", "variant", "dir", "bytes", "plugin c/s", "floor c/s", "ratio", "us/copy",
        "calls/copy", "us/call", "own"))
    for r in rows:
        if r["mode"] != "stream":
            continue
        print("%-6s %-14s %-12s %9d %12.0f %12s %7s %9.3f %10s %8s %7s" % (
            r["hog"], r.get("variant", ""), r["dir"], r["bytes"], r["plugin_copies_per_s"],
            "%.0f" % r["floor_copies_per_s"] if "floor_copies_per_s" in r else "-",
            r.get("ratio_to_floor_rate", "-"), r["helper_work_us_per_copy"],
            r.get("calls_per_copy", "-"), r.get("driver_us_per_call", "-"),
            r.get("helper_own_us_per_copy", "-")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--json")
    ap.add_argument("--commit", default="")
    ap.add_argument("--gpu", default="")
    ap.add_argument("--date", default="")
    a = ap.parse_args()
    raw = load(a.jsonl)
    rows = join(raw)
    show(rows)
    for r in raw:
        if r["mode"] == "witness":
            print("hog %-6s %-14s an 8-byte copy within the GPU took %.1f us" % (
                r["hog"], r.get("variant", ""), r["d2d_8b_us"]))
    if a.json:
        rows += [r for r in raw if r["mode"] == "witness"]
        for r in rows:
            r.update({"gpus": 1, "gpu": a.gpu, "commit": a.commit, "date": a.date})
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
