#!/usr/bin/env python3
"""One workload's three runs (native, plugin, plugin with NCCL_PASS_SM=1)
set side by side: the loss checks, then one row into the rows file.

Each run is the JSON that train.py wrote for it.  The row is written only
when every check holds; the exit status is 1 otherwise, each failed check
named on its own line.  Standard library only.

Usage: compare.py ROWS.json native=RUN.json plugin=RUN.json pass_sm=RUN.json
                  [--commit C] [--date YYYY-MM-DD]"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rows as rowfile  # noqa: E402
import stats  # noqa: E402

MODES = ("native", "plugin", "pass_sm")


def read_runs(specs):
    """{mode: run} from MODE=PATH arguments; problems for the missing."""
    runs, problems = {}, []
    for spec in specs:
        mode, _, path = spec.partition("=")
        if mode not in MODES or not path:
            raise SystemExit(f"compare.py: '{spec}': expected MODE=PATH, MODE one of {MODES}")
        try:
            with open(path) as f:
                runs[mode] = json.load(f)
        except (OSError, ValueError) as e:
            problems.append(f"{mode}: no result ({e})")
    for mode in MODES:
        if mode not in runs and not any(p.startswith(mode + ":") for p in problems):
            problems.append(f"{mode}: not given")
    return runs, problems


def check(runs):
    """Every problem with the runs: missing, failed, not the same
    workload, losses off native's, replicas that disagree."""
    problems = []
    for mode, run in runs.items():
        if run.get("error"):
            problems.append(f"{mode}: failed: {run['error']}")
        if run.get("replicas_agree") is False:
            problems.append(f"{mode}: the ranks' copies of the replicated parameters differ "
                            "after training (a gradient all_reduce gave ranks different sums)")
        if not run.get("step_ms"):
            problems.append(f"{mode}: no timed step")
    same = {(r.get("workload"), r.get("gpus"), r.get("ranks"), bool(r.get("posed")),
             json.dumps(r.get("config"), sort_keys=True)) for r in runs.values()}
    if len(same) > 1:
        problems.append("the runs are not of one workload, GPU count and model: "
                        + "; ".join(str(s[:4]) for s in sorted(same, key=str)))
    native = runs.get("native")
    if native:
        problems += stats.finite_problems("native", native.get("losses"))
        for mode in MODES[1:]:
            if mode in runs:
                problems += stats.loss_problems(mode, native.get("losses") or [],
                                                runs[mode].get("losses") or [])
    return problems


def row(runs, commit, date):
    """The rows file's row: median and p90 step time per mode."""
    first = runs["native"]
    r = {"workload": first["workload"], "gpus": first["gpus"],
         "nccl_version": first.get("nccl_version", "unknown"), "commit": commit, "date": date,
         "steps": len(first["step_ms"])}
    for mode in MODES:
        ms = runs[mode]["step_ms"]
        r[f"{mode}_ms"] = round(stats.median(ms), 3)
        r[f"{mode}_p90_ms"] = round(stats.percentile(ms, 90), 3)
    if first.get("posed"):
        r["posed"] = True
    return r


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows")
    ap.add_argument("runs", nargs="+", metavar="MODE=PATH")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--date", default=rowfile.today())
    a = ap.parse_args(argv)
    runs, problems = read_runs(a.runs)
    problems += check(runs)
    name = "/".join(sorted({f"{r.get('workload')} on {r.get('gpus')} GPU(s)"
                            for r in runs.values()})) or "e2e"
    if problems:
        for p in problems:
            print(f"FAILED: {name}: {p}")
        return 1
    r = row(runs, a.commit, a.date)
    rowfile.merge_into(a.rows, [r])
    posed = " (posed: timings meaningless)" if r.get("posed") else ""
    print(f"{name}: step ms median/p90 native {r['native_ms']}/{r['native_p90_ms']}, "
          f"plugin {r['plugin_ms']}/{r['plugin_p90_ms']}, "
          f"pass_sm {r['pass_sm_ms']}/{r['pass_sm_p90_ms']}; "
          f"losses track native{posed}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
