"""A short fixed fault campaign on the shared sandbox (docs/faults.md):
user load runs while a worker is killed, a regional Neutron hangs while the
Isthmus database is locked, and a regional Neutron is restored from a backup.
After each, every invariant holds again and no request failed in a region the
fault did not touch. The long campaign is ``tools/faults.py campaign``."""

from __future__ import annotations

import io

import pytest

from tests.integration.helpers import sandbox_layout

pytestmark = pytest.mark.integration

CYCLES = [["kill:isthmus-xjob"], ["freeze:neutron-RegionTwo", "isthmus_db:locked"], ["restore:RegionOne"]]


@pytest.mark.exclusive
def test_a_short_campaign_loses_nothing_and_converges(sandbox):
    from isthmus.sandbox.campaign.run import Campaign, Settings, report

    out = io.StringIO()
    settings = Settings(seed=25, count=len(CYCLES), hold=10, warmup=8, converge_timeout=180)
    campaign = Campaign(sandbox_layout(sandbox.state_dir), settings,
                        lambda region, cloud: sandbox.connect(region, cloud=cloud), out)
    outcomes = campaign.run(CYCLES)
    data = report(outcomes, settings)
    print(out.getvalue())
    assert len(outcomes) == len(CYCLES), out.getvalue()
    for outcome in outcomes:
        assert outcome.violations == [], (outcome.faults, outcome.violations)
        assert outcome.unfaulted_failures == [], (outcome.faults, outcome.unfaulted_failures)
        assert outcome.converge_seconds is not None and not outcome.lift_errors, outcome
    assert data["violations"] == 0
    assert sum(1 for r in campaign.ledger.requests if r.ok) > 0  # the load really ran
