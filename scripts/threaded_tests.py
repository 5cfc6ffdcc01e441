#!/usr/bin/env python3
"""Prints the names of the tests in meson build directory argv[1] whose
program starts threads of its own (a C source of its executable calls
pthread_create): what scripts/sanitize.sh runs under ThreadSanitizer.
Tests of the rdma suite are left out, and so are those of the spinning
suite: processes that spin on each other, which ThreadSanitizer slows past
any CI bound on two cores (AddressSanitizer runs them)."""
import json
import subprocess
import sys

build = sys.argv[1]


def introspect(what):
    out = subprocess.check_output(["meson", "introspect", what, build])
    return json.loads(out)


def starts_threads(target):
    for group in target.get("target_sources", []):
        for src in group.get("sources", []):
            if src.endswith(".c"):
                with open(src, encoding="utf-8", errors="replace") as f:
                    if "pthread_create" in f.read():
                        return True
    return False


threaded = set()
for target in introspect("--targets"):
    if target["type"] == "executable" and starts_threads(target):
        threaded.update(target["filename"])
for test in introspect("--tests"):
    # Suites are named "project:suite".
    suites = {s.split(":")[-1] for s in test["suite"]}
    if test["cmd"] and test["cmd"][0] in threaded and not suites & {"rdma", "spinning"}:
        print(test["name"])
