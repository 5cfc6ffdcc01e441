#!/usr/bin/env python3
"""Counts test cases over several runs and prints one line,
"N passed, N failed, N skipped".

Usage: count_tests.py [TESTLOG.json ...] [--tap RESULTS.tap ...]

A meson test log (testlog.json) counts every TAP line of every test
program, plus one failure for a program that failed without saying which
case (a crash, a timeout), and one pass for a program without TAP lines
that passed (its exit status is its one case).  A TAP file (the fuzz
targets', the sanitizer builds' report checks) counts its ok / not ok
lines.  A file that is missing counts as one failure: its run did not
happen."""
import json
import re
import sys


class Count:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def tap(self, text):
        """Counts TAP lines; returns whether there were any."""
        ok = re.findall(r"^ok \d+.*$", text, re.M)
        bad = re.findall(r"^not ok \d+.*$", text, re.M)
        skip = [l for l in ok if re.search(r"#\s*SKIP", l, re.I)]
        self.passed += len(ok) - len(skip)
        self.skipped += len(skip)
        self.failed += len(bad)
        return bool(ok or bad)

    def testlog(self, path):
        with open(path) as log:
            for line in log:
                entry = json.loads(line)
                out = entry.get("stdout", "") or ""
                bad = re.search(r"^not ok \d+", out, re.M) is not None
                any_tap = self.tap(out)
                result = entry.get("result")
                if result not in ("OK", "SKIP", "EXPECTEDFAIL") and not bad:
                    self.failed += 1
                if result == "SKIP" and not any_tap:
                    self.skipped += 1
                if result == "OK" and not any_tap:
                    self.passed += 1


def main(args):
    count = Count()
    tap = False
    for arg in args:
        if arg == "--tap":
            tap = True
            continue
        try:
            if tap:
                with open(arg) as f:
                    count.tap(f.read())
            else:
                count.testlog(arg)
        except FileNotFoundError:
            print(f"count_tests: {arg} is missing: its run did not happen", file=sys.stderr)
            count.failed += 1
        tap = False
    print(f"{count.passed} passed, {count.failed} failed, {count.skipped} skipped")


main(sys.argv[1:])
