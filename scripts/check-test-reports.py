#!/usr/bin/python3
"""Reads the Surefire reports of the run that just ended and fails it when
- a test module (a module with src/test/java) ran no test (with --all: the whole reactor was built), or
- a test was skipped for any reason but a missing GPU (ai.arbor.testing.Gpu: messages "no GPU: ...").
Each GPU skip is printed with its reason. Prints the closing line "tests: N passed, N failed, N skipped".

usage: check-test-reports.py ROOT STAMP [--all]   (STAMP: a file touched before the run; older reports are
stale and ignored)
"""
import os
import sys
import xml.etree.ElementTree as ET

GPU_PREFIX = "no GPU: "


def main():
    root, stamp = sys.argv[1], sys.argv[2]
    whole = "--all" in sys.argv[3:]
    since = os.path.getmtime(stamp)
    modules = []
    for dirpath, dirnames, _ in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("target", ".git", "node_modules", "examples")]
        if os.path.isfile(os.path.join(dirpath, "pom.xml")) and os.path.isdir(os.path.join(dirpath, "src/test/java")):
            modules.append(os.path.relpath(dirpath, root))
    problems, gpu_skips = [], []
    passed = failed = skipped = 0
    for m in sorted(modules):
        reports = os.path.join(root, m, "target/surefire-reports")
        files = [os.path.join(reports, f) for f in sorted(os.listdir(reports))] if os.path.isdir(reports) else []
        files = [f for f in files if f.endswith(".xml") and f.rsplit("/", 1)[1].startswith("TEST-")
                 and os.path.getmtime(f) >= since]
        ran = 0
        for f in files:
            suite = ET.parse(f).getroot()
            for case in suite.iter("testcase"):
                name = "%s.%s" % (case.get("classname", "?").rsplit(".", 1)[-1], case.get("name", "?"))
                skip = case.find("skipped")
                if skip is not None:
                    skipped += 1
                    why = (skip.get("message") or skip.text or "").strip()
                    why = why.split("\n", 1)[0]
                    if why.startswith("org.opentest4j.TestAbortedException: "):
                        why = why[len("org.opentest4j.TestAbortedException: "):]
                    if why.startswith("Assumption failed: "):
                        why = why[len("Assumption failed: "):]
                    if why.startswith(GPU_PREFIX):
                        gpu_skips.append("%s: %s" % (name, why))
                    else:
                        problems.append("%s (%s) was skipped, and only a missing GPU may skip a test: %s" % (name, m, why or "no reason given"))
                    continue
                ran += 1
                if case.find("failure") is not None or case.find("error") is not None:
                    failed += 1
                else:
                    passed += 1
        if ran == 0 and (whole or files):
            problems.append("module %s has tests but executed none in this run" % m)
    for s in gpu_skips:
        print("GPU skip: " + s)
    for p in problems:
        print("test report check: " + p, file=sys.stderr)
    print("tests: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if problems or failed else 0


if __name__ == "__main__":
    sys.exit(main())
