#!/usr/bin/env python3
"""Counts test cases in a meson test log: every TAP line of every test
program, plus one failure for a program that failed without saying which
case (a crash, a timeout), and one pass for a program without TAP lines
that passed (its exit status is its one case)."""
import json
import re
import sys

passed = failed = skipped = 0
with open(sys.argv[1]) as log:
    for line in log:
        entry = json.loads(line)
        out = entry.get("stdout", "") or ""
        ok = re.findall(r"^ok \d+.*$", out, re.M)
        bad = re.findall(r"^not ok \d+.*$", out, re.M)
        skip = [l for l in ok if re.search(r"#\s*SKIP", l, re.I)]
        passed += len(ok) - len(skip)
        skipped += len(skip)
        failed += len(bad)
        if entry.get("result") not in ("OK", "SKIP", "EXPECTEDFAIL") and not bad:
            failed += 1
        if entry.get("result") == "SKIP" and not ok:
            skipped += 1
        if entry.get("result") == "OK" and not ok and not bad:
            passed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
