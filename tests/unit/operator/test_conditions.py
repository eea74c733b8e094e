"""Condition aggregation, table-driven."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from isthmus.operator import conditions as c

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def cond(type_, status, reason="R", message="m", when="2026-01-01T00:00:00Z"):
    return c.Condition(type_, status, reason, message, when)


SUMMARY_CASES = [
    ("all true", [cond("A", "True"), cond("B", "True")], ("True", "Ready")),
    ("no subconditions", [], ("True", "Ready")),
    ("unknown beats true", [cond("A", "True"), cond("B", "Unknown", "Requested")], ("Unknown", "Requested")),
    ("false info beats unknown", [cond("A", "Unknown"), cond("B", "False", "Waiting")], ("False", "Waiting")),
    ("warning beats info", [cond("A", "False", "Waiting"), cond("B", "False", "SecretNotFound")],
     ("False", "SecretNotFound")),
    ("error beats warning", [cond("A", "False", "SecretNotFound"), cond("B", "False", "RangeMismatch")],
     ("False", "RangeMismatch")),
    ("tie: most recent wins", [cond("A", "False", "W1", when="2026-01-01T00:00:00Z"),
                               cond("B", "False", "W2", when="2026-01-02T00:00:00Z")], ("False", "W2")),
    ("Ready itself is ignored", [cond("Ready", "False", "Old"), cond("A", "True")], ("True", "Ready")),
]


@pytest.mark.parametrize("subs,expected", [x[1:] for x in SUMMARY_CASES], ids=[x[0] for x in SUMMARY_CASES])
def test_summarise(subs, expected) -> None:
    ready = c.summarise(subs)
    assert (ready.status, ready.reason) == expected


def test_merge_sorts_ready_first_and_keeps_transition_times() -> None:
    first = c.merge([], [cond("ZetaReady", "True"), cond("AlphaReady", "Unknown", "Requested")], 1, T0)
    assert [x["type"] for x in first] == ["Ready", "AlphaReady", "ZetaReady"]
    assert all(x["lastTransitionTime"] == "2026-01-01T00:00:00Z" and x["observedGeneration"] == 1 for x in first)
    later = T0 + timedelta(hours=1)
    second = c.merge(first, [cond("ZetaReady", "True"), cond("AlphaReady", "True")], 2, later)
    times = {x["type"]: x["lastTransitionTime"] for x in second}
    assert times["ZetaReady"] == "2026-01-01T00:00:00Z"  # unchanged
    assert times["AlphaReady"] == times["Ready"] == "2026-01-01T01:00:00Z"  # changed
    assert c.merge(second, [cond("ZetaReady", "True"), cond("AlphaReady", "True")], 2,
                   later + timedelta(hours=1)) == second


def test_merge_drops_conditions_no_longer_desired() -> None:
    first = c.merge([], [cond("NovaReady", "True"), cond("NeutronReady", "True")], 1, T0)
    assert [x["type"] for x in c.merge(first, [cond("NeutronReady", "True")], 1, T0)] == ["Ready", "NeutronReady"]


def child(ready_status=None, generation=1, observed=1, message="m", reason="R"):
    status = {"observedGeneration": observed}
    if ready_status:
        status["conditions"] = [{"type": "Ready", "status": ready_status, "reason": reason, "message": message,
                                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    return {"metadata": {"generation": generation}, "status": status}


MIRROR_CASES = [
    ("missing child", None, ("Unknown", "not created yet")),
    ("no conditions", child(), ("Unknown", "setup started")),
    ("ready", child("True"), ("True", "")),
    ("ready for an old generation", child("True", generation=2, observed=1), ("Unknown", "applying generation 2")),
    ("not ready", child("False", message="neutron down"), ("False", "Region RegionTwo: neutron down")),
]


@pytest.mark.parametrize("kid,expected", [x[1:] for x in MIRROR_CASES], ids=[x[0] for x in MIRROR_CASES])
def test_mirror(kid, expected) -> None:
    mirrored = c.mirror("RegionsReady", kid, "Region RegionTwo")
    assert mirrored.status == expected[0]
    assert expected[1] in mirrored.message


def test_mirror_many_lists_every_failing_child() -> None:
    result = c.mirror_many("RegionsReady", [("Region A", child("True")), ("Region B", child("False", message="x")),
                                            ("Region C", child("False", reason="RangeMismatch", message="y"))])
    assert (result.status, result.reason) == ("False", "RangeMismatch")
    assert result.message == "Region C: y; Region B: x"
    assert c.mirror_many("RegionsReady", [("Region A", child("True"))]).status == "True"
