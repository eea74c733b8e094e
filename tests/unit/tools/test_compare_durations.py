"""tools/compare_durations.py: reading JUnit reports and listing what slowed down."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tools import compare_durations


def _report(path: Path, cases: dict[str, float], failed: tuple[str, ...] = ()) -> Path:
    body = "".join(
        f'<testcase classname="tests.unit.test_x" name="{name}" time="{seconds}">'
        + ('<failure message="boom"/>' if name in failed else "") + "</testcase>"
        for name, seconds in cases.items())
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    return path


def test_lists_the_slowdown_and_the_new_test(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _report(tmp_path / "a" / "unit.xml", {"test_fast": 1.0, "test_slowed": 2.0, "test_gone": 3.0})
    _report(tmp_path / "b" / "unit.xml", {"test_fast": 1.1, "test_slowed": 9.0, "test_new": 4.0}, failed=("test_new",))
    before = compare_durations.read_cases(tmp_path / "a")
    after = compare_durations.read_cases(tmp_path / "b")
    assert after["unit::tests.unit.test_x::test_new"].outcome == "failure"
    out = io.StringIO()
    slowed = compare_durations.compare(before, after, top=10, min_seconds=2, out=out)
    text = out.getvalue()
    assert slowed == 1
    slower = text.split("Slower")[1].split("Faster")[0]
    assert "test_slowed" in slower and "+7.0" in slower and "test_fast" not in slower
    assert "Only before: 1; only after: 1" in text and "new      4.0  unit::tests.unit.test_x::test_new" in text
    assert text.splitlines()[2].split() == ["unit", "6.0", "14.1", "+8.1"]


def test_a_file_that_is_no_report_is_one_error_line(tmp_path):
    bad = tmp_path / "x.xml"
    bad.write_text("not xml")
    with pytest.raises(SystemExit, match="x.xml: not a JUnit XML report"):
        compare_durations.read_cases(bad)
