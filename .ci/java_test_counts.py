#!/usr/bin/env python3
"""Prints the Java test counts of the last Maven run as one line,
``java: N tests, N failures, N errors, N skipped``: `mvn -q` hides Surefire's own summary.

Sums the ``testsuite`` attributes of every ``*/target/{surefire,failsafe}-reports/TEST-*.xml``.
``--since FILE`` counts only reports written after FILE was (a stamp touched before the run), so
reports left by an earlier run of a test class that is gone now are not counted.
"""

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COUNTS = ("tests", "failures", "errors", "skipped")


def suite_counts(report: Path) -> dict[str, int]:
    # The testsuite element is the root: its start tag is all that is needed.
    for _, element in ET.iterparse(report, events=("start",)):
        return {name: int(element.get(name, 0)) for name in COUNTS}
    return dict.fromkeys(COUNTS, 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--since", type=Path, help="count only reports newer than this file")
    args = parser.parse_args()
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
    print("java: " + ", ".join(f"{totals[name]} {name}" for name in COUNTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
