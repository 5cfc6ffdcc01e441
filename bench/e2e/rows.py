#!/usr/bin/env python3
"""The benchmarks' result files: JSON lists of rows, one row a line.

A row of bench/results/e2e.json is keyed by (workload, gpus), one of
bench/results/sweep.json by (op, gpus, bytes); merging replaces rows
with the same key and keeps the others, so a run on 4 GPUs leaves the
8-GPU rows alone.  Standard library only.

Usage:
  rows.py merge DEST SRC...
      fold the rows of each SRC file into DEST (e.g. a GPU run's
      $OUT/e2e.json into bench/results/e2e.json)
  rows.py sweep DEST JSONL... [--commit C] [--date YYYY-MM-DD]
      sweep rows from nccl_bench -j lines (both phases run), into DEST
  rows.py table FILE
      FILE's rows as a Markdown table (for bench/results/e2e.md)"""
import argparse
import datetime
import json
import os
import sys


def key(row):
    """The key a row is replaced by."""
    if "workload" in row:
        return ("e2e", row["workload"], int(row["gpus"]))
    if "op" in row:
        return ("sweep", row["op"], int(row["gpus"]), int(row["bytes"]))
    raise ValueError(f"a row with neither workload nor op: {row!r}")


def load(path):
    """The rows of `path`; none for a file that does not exist yet."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = json.load(f)
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path}: not a JSON list of objects")
    return rows


def merge(rows, new):
    """rows with every row of `new` in place of the one with its key (or
    added), sorted by key so that the file's diffs stay small."""
    by_key = {key(r): r for r in rows}
    for r in new:
        by_key[key(r)] = r
    return [by_key[k] for k in sorted(by_key)]


def save(path, rows):
    """One row a line, written to a temporary file and renamed, so a
    reader never sees half a file."""
    text = "[\n" + ",\n".join(json.dumps(r, sort_keys=True) for r in rows) + "\n]\n"
    if not rows:
        text = "[]\n"
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def merge_into(path, new):
    save(path, merge(load(path), new))


def ratio(b):
    """The plugin's busbw over native's, from the times: the same bytes and
    bus factor divide out, and the times keep the digits that a bandwidth
    of a few bytes loses."""
    nus, pus = b.get("native_us"), b.get("plugin_us")
    if nus and pus and nus > 0 and pus > 0:
        return round(nus / pus, 4)
    nbw, pbw = b.get("native_busbw"), b.get("plugin_busbw")
    return round(pbw / nbw, 4) if nbw and pbw is not None and nbw > 0 else None


def sweep_rows(lines, commit, date):
    """Sweep rows from nccl_bench -j lines: one per op, rank count and
    size that ran in both phases with every element right.  Returns
    (rows, problems)."""
    rows, problems = [], []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            b = json.loads(line)
        except ValueError as e:
            problems.append(f"line {n}: not JSON ({e})")
            continue
        where = f"{b.get('op')} {b.get('bytes')} B on {b.get('ranks')} ranks"
        if b.get("errors"):
            problems.append(f"{where}: {b['errors']} wrong element(s), left out")
            continue
        if b.get("bytes", 0) == 0:
            continue   # no bandwidth at 0 bytes
        nbw, pbw = b.get("native_busbw"), b.get("plugin_busbw")
        if nbw is None or pbw is None:
            problems.append(f"{where}: not run in both phases, left out")
            continue
        rows.append({
            "op": b["op"], "gpus": int(b["ranks"]), "bytes": int(b["bytes"]),
            "native_busbw": nbw, "plugin_busbw": pbw,
            "native_us": b["native_us"], "plugin_us": b["plugin_us"],
            "ratio": ratio(b),
            "nccl_version": b.get("nccl_version", "unknown"),
            "commit": commit, "date": date,
        })
    return rows, problems


def _ms(row, mode):
    m, p90 = row.get(f"{mode}_ms"), row.get(f"{mode}_p90_ms")
    if m is None:
        return "-"
    return f"{m:.1f} ({p90:.1f})" if p90 is not None else f"{m:.1f}"


def _over(row, mode):
    m, n = row.get(f"{mode}_ms"), row.get("native_ms")
    return f"{m / n:.3f}" if m and n else "-"


def _num(v, fmt):
    return "-" if v is None else format(v, fmt)


def _e2e_table(rows):
    out = ["| workload | GPUs | native ms (p90) | plugin ms (p90) | PASS_SM ms (p90) "
           "| plugin / native | PASS_SM / native | NCCL | commit | date |",
           "|---|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for r in rows:
        gpus = f"{r['gpus']}, posed: times meaningless" if r.get("posed") else str(r["gpus"])
        out.append(f"| {r['workload']} | {gpus} | {_ms(r, 'native')} | {_ms(r, 'plugin')} "
                   f"| {_ms(r, 'pass_sm')} | {_over(r, 'plugin')} | {_over(r, 'pass_sm')} "
                   f"| {r.get('nccl_version', '-')} | {r.get('commit', '-')} "
                   f"| {r.get('date', '-')} |")
    return out


def _sweep_table(rows):
    out = ["| op | GPUs | bytes | native GB/s | plugin GB/s | ratio | NCCL | commit | date |",
           "|---|---:|---:|---:|---:|---:|---|---|---|"]
    for r in rows:
        out.append(f"| {r['op']} | {r['gpus']} | {r['bytes']} "
                   f"| {_num(r.get('native_busbw'), '.2f')} | {_num(r.get('plugin_busbw'), '.2f')} "
                   f"| {_num(r.get('ratio'), '.3f')} | {r.get('nccl_version', '-')} "
                   f"| {r.get('commit', '-')} | {r.get('date', '-')} |")
    return out


def table(rows):
    """Markdown, one line per row: the end-to-end rows' step times and
    their ratio to native's (above 1: slower), the sweep rows' bandwidths;
    "not yet run" for no rows."""
    parts = []
    e2e = [r for r in rows if "workload" in r]
    sweep = [r for r in rows if "op" in r]
    if e2e:
        parts.append("\n".join(_e2e_table(e2e)))
    if sweep:
        parts.append("\n".join(_sweep_table(sweep)))
    return "\n\n".join(parts) + "\n" if parts else "not yet run\n"


def today():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge")
    m.add_argument("dest")
    m.add_argument("src", nargs="+")
    s = sub.add_parser("sweep")
    s.add_argument("dest")
    s.add_argument("jsonl", nargs="+")
    s.add_argument("--commit", default="unknown")
    s.add_argument("--date", default=today())
    t = sub.add_parser("table")
    t.add_argument("file")
    a = ap.parse_args(argv)
    if a.cmd == "table":
        sys.stdout.write(table(load(a.file)))
        return 0
    if a.cmd == "merge":
        new = [r for path in a.src for r in load(path)]
        merge_into(a.dest, new)
        print(f"{a.dest}: {len(new)} row(s) merged")
        return 0
    lines = []
    for path in a.jsonl:
        with open(path) as f:
            lines += f.readlines()
    rows, problems = sweep_rows(lines, a.commit, a.date)
    for p in problems:
        print(f"sweep: {p}", file=sys.stderr)
    if not rows:
        print(f"sweep: no row to write from {' '.join(a.jsonl)}", file=sys.stderr)
        return 1
    merge_into(a.dest, rows)
    print(f"{a.dest}: {len(rows)} sweep row(s) merged")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
