#!/usr/bin/env python3
"""Compare the test durations of two runs, from their JUnit XML reports.

    tools/compare_durations.py BEFORE AFTER [--top 25] [--min-seconds 2]

BEFORE and AFTER are report files or folders of them (tools/test.sh writes one
per pytest run to test-reports/: unit.xml, component.xml, integration.xml,
integration-exclusive.xml). Prints each report's total, then the tests that
slowed down most, those that sped up most, and the tests only one run has, so a
slowdown is visible in review. Standard library only: it runs without .venv.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO


@dataclass(frozen=True)
class Case:
    report: str
    test: str
    seconds: float
    outcome: str


def read_cases(path: Path) -> dict[str, Case]:
    """Every test case of the report(s) at ``path``, keyed ``report::test``."""
    files = sorted(path.glob("*.xml")) if path.is_dir() else [path]
    if not files:
        raise SystemExit(f"no JUnit XML report in {path}")
    cases: dict[str, Case] = {}
    for file in files:
        try:
            root = ET.parse(file).getroot()
        except ET.ParseError as err:
            raise SystemExit(f"{file}: not a JUnit XML report ({err})") from err
        for element in root.iter("testcase"):
            test = f"{element.get('classname', '')}::{element.get('name', '')}"
            outcome = "passed"
            for child in element:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = child.tag
            case = Case(file.stem, test, float(element.get("time") or 0), outcome)
            cases[f"{case.report}::{test}"] = case
    return cases


def totals(cases: dict[str, Case]) -> dict[str, float]:
    result: dict[str, float] = {}
    for case in cases.values():
        result[case.report] = result.get(case.report, 0.0) + case.seconds
    return result


def _table(rows: Sequence[tuple[str, ...]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        out.write("  ".join(cells).rstrip() + "\n")


def compare(before: dict[str, Case], after: dict[str, Case], top: int, min_seconds: float,
            out: TextIO = sys.stdout) -> int:
    """Print the comparison; returns how many tests slowed by at least ``min_seconds`` and 50 %."""
    out.write("Total seconds per report (test time summed; parallel runs take less wall time)\n")
    tb, ta = totals(before), totals(after)
    rows = [("report", "before", "after", "change")]
    for report in sorted(set(tb) | set(ta)):
        b, a = tb.get(report, 0.0), ta.get(report, 0.0)
        rows.append((report, f"{b:.1f}", f"{a:.1f}", f"{a - b:+.1f}"))
    _table(rows, out)

    common = sorted(set(before) & set(after))
    deltas = [(after[k].seconds - before[k].seconds, k) for k in common]
    slower = sorted((d for d in deltas if d[0] >= min_seconds), reverse=True)[:top]
    faster = sorted(d for d in deltas if d[0] <= -min_seconds)[:top]
    for title, chosen in (("Slower", slower), ("Faster", faster)):
        out.write(f"\n{title} by at least {min_seconds:g} s ({len(chosen)} shown)\n")
        if chosen:
            rows = [("test", "before", "after", "change")]
            rows += [(k, f"{before[k].seconds:.1f}", f"{after[k].seconds:.1f}", f"{d:+.1f}") for d, k in chosen]
            _table(rows, out)
    only_before, only_after = sorted(set(before) - set(after)), sorted(set(after) - set(before))
    out.write(f"\nOnly before: {len(only_before)}; only after: {len(only_after)}\n")
    for key in sorted(only_after, key=lambda k: -after[k].seconds)[:top]:
        out.write(f"  new  {after[key].seconds:7.1f}  {key}\n")
    return sum(1 for d, k in slower if after[k].seconds >= 1.5 * before[k].seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--top", type=int, default=25, help="rows per table (default 25)")
    parser.add_argument("--min-seconds", type=float, default=2.0, help="smallest change listed (default 2)")
    args = parser.parse_args(argv)
    compare(read_cases(args.before), read_cases(args.after), args.top, args.min_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
