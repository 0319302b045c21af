#!/usr/bin/env python3
"""Prints a test suite's counts as one line, ``java: N passed, N failed, N skipped`` (failed
counts failures and errors): `make test` ends with one such line per suite, whichever failed.

``java``: the Surefire reports of the last Maven run (`mvn -q` hides Surefire's own summary),
every ``*/target/{surefire,failsafe}-reports/TEST-*.xml``; ``--since FILE`` counts only reports
written after FILE was (a stamp touched before the run), so reports left by an earlier run of a
test class that is gone now are not counted.
``python REPORT [--label WORD]``: the JUnit XML report pytest wrote (``--junitxml``).
"""

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COUNTS = ("tests", "failures", "errors", "skipped")


def suite_counts(report: Path) -> dict[str, int]:
    """The counts of a report whose root is one testsuite (Surefire): its start tag is enough."""
    for _, element in ET.iterparse(report, events=("start",)):
        return {name: int(element.get(name, 0)) for name in COUNTS}
    return dict.fromkeys(COUNTS, 0)


def junit_counts(report: Path) -> dict[str, int]:
    """The counts of a report with a testsuites root (pytest), summed over its suites."""
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    totals = dict.fromkeys(COUNTS, 0)
    for suite in suites:
        for name in COUNTS:
            totals[name] += int(suite.get(name, 0))
    return totals


def line(suite: str, totals: dict[str, int]) -> str:
    failed = totals["failures"] + totals["errors"]
    # max: pytest counts a test that fails and then errors in teardown twice
    passed = max(0, totals["tests"] - failed - totals["skipped"])
    return f"{suite}: {passed} passed, {failed} failed, {totals['skipped']} skipped"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="suite", required=True)
    java = sub.add_parser("java", help="the Surefire reports under */target")
    java.add_argument("--since", type=Path, help="count only reports newer than this file")
    python = sub.add_parser("python", help="a pytest --junitxml report")
    python.add_argument("report", type=Path)
    python.add_argument("--label", default="python", help="the line's first word")
    args = parser.parse_args()
    if args.suite == "python":
        if not args.report.is_file():
            print(f"{args.label}: no test report (these Python tests did not run)")
            return 0
        try:
            print(line(args.label, junit_counts(args.report)))
        except ET.ParseError as error:  # pytest killed while writing it
            print(f"{args.label}: the test report {args.report} cannot be read ({error})")
        return 0
    since = args.since.stat().st_mtime if args.since and args.since.exists() else 0.0
    reports = [p for kind in ("surefire", "failsafe")
               for p in ROOT.glob(f"*/target/{kind}-reports/TEST-*.xml")
               if p.stat().st_mtime >= since]
    if not reports:
        print("java: no test reports (the Java tests did not run)")
        return 0
    totals = dict.fromkeys(COUNTS, 0)
    for report in reports:
        for name, value in suite_counts(report).items():
            totals[name] += value
    print(line("java", totals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
