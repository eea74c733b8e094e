"""The fault campaign's pure parts: its seeded plan, its invariants, its ledger."""

from __future__ import annotations

import time
from pathlib import Path

from isthmus.network import PROFILE_KEY, SHADOW_OWNER
from isthmus.sandbox.campaign import invariants
from isthmus.sandbox.campaign.load import Ledger
from isthmus.sandbox.campaign.run import KINDS, Outcome, Settings, fault_names, plan, summary
from isthmus.sandbox.layout import Layout


def _layout(tmp_path: Path) -> Layout:
    return Layout(state_dir=tmp_path / "s")


def test_every_kind_has_faults_for_every_region_and_service(tmp_path):
    names = fault_names(_layout(tmp_path), KINDS)
    assert {"kill:isthmus-xjob", "freeze:neutron-CentralRegion", "kill:nova-api-RegionTwo", "cut_off:RegionOne",
            "restore:RegionTwo", "rabbitmq:stop_app", "isthmus_db:locked", "kill:mariadb"} <= set(names)
    assert len(names) == len(set(names))


def test_the_plan_is_seeded_and_covers_every_fault_before_repeating(tmp_path):
    names = fault_names(_layout(tmp_path), KINDS)
    settings = Settings(seed=7, count=len(names) + 5, pairs=0.3)
    first = plan(names, settings)
    assert first == plan(names, settings)  # the same seed, the same campaign
    assert first != plan(names, Settings(seed=8, count=len(names) + 5, pairs=0.3))
    assert {cycle[0] for cycle in first[:len(names)]} == set(names)
    pairs = [c for c in first if len(c) == 2]
    assert pairs and all(a.split(":", 1)[1] != b.split(":", 1)[1] for a, b in pairs)
    assert not any(len(c) == 2 and any(n.startswith("restore:") for n in c) for c in first)


def test_a_long_campaign_uses_every_kind_at_least_twice(tmp_path):
    """The issue's campaign: 60 faults, every kind twice, restores three times. With
    partners drawn at random, kinds of one fault (RabbitMQ) came up once in 61."""
    names = fault_names(_layout(tmp_path), KINDS)
    for seed in range(1, 6):
        cycles = plan(names, Settings(seed=seed, count=42, pairs=0.5))
        faults = [n for cycle in cycles for n in cycle]
        kinds = [("mariadb" if n == "kill:mariadb" else n.split(":", 1)[0]) for n in faults]
        assert all(kinds.count(kind) >= 2 for kind in KINDS), (seed, sorted(set(kinds)))
        assert kinds.count("restore") >= 3, seed


def _port(port_id, region=None, mac="fa:16:3e:00:00:01", ip="10.66.0.5", owner="compute:nova"):
    return {"id": port_id, "mac_address": mac, "fixed_ips": [{"ip_address": ip}], "device_owner": owner,
            "binding:host_id": "h" if region else "",
            "binding:profile": {PROFILE_KEY: {"region": region}} if region else {}}


def _snapshot(central, one, two, servers=None):
    return invariants.Snapshot({p["id"]: p for p in central}, {"RegionOne": one, "RegionTwo": two},
                               servers or {"RegionOne": {}, "RegionTwo": {}})


DHCP = {"id": "dhcp", "device_owner": "network:dhcp", "mac_address": "m", "fixed_ips": []}


def test_a_converged_snapshot_has_no_violations():
    bound = _port("p1", "RegionOne")
    snap = _snapshot([bound, DHCP], [dict(bound), DHCP], [{**bound, "device_owner": SHADOW_OWNER}, DHCP],
                     {"RegionOne": {"vm1": "ACTIVE"}, "RegionTwo": {}})
    assert invariants.check(snap, {"vm1": "RegionOne"}, {"p1"}) == []


def test_each_invariant_names_what_broke():
    bound = _port("p1", "RegionOne")
    member = _port("p3", "RegionTwo", ip="10.66.0.9")
    snap = _snapshot([bound, member, DHCP],
                     [{**bound, "mac_address": "fa:16:3e:99:99:99"}, _port("gone", owner="compute:nova"), DHCP,
                      {**member, "device_owner": SHADOW_OWNER}],
                     [DHCP, member], {"RegionOne": {}, "RegionTwo": {}})
    snap.failed_jobs.append("network_sync n1: boom")
    found = invariants.check(snap, {"vm1": "RegionOne"}, {"p1", "p2"})
    assert "lost: server vm1 in RegionOne" in found and "lost: port p2 at central" in found
    assert any(v.startswith("bound: port p1 in RegionOne differs") for v in found)
    assert any(v.startswith("shadow: port p1") and "0 shadows in RegionTwo" in v for v in found)
    assert any(v.startswith("stale: gone") for v in found)
    assert "job failed: network_sync n1: boom" in found


def test_a_region_without_members_on_the_network_needs_no_shadow():
    bound = _port("p1", "RegionOne")
    assert invariants.bound_copies(_snapshot([bound], [dict(bound)], [])) == []
    assert invariants.bound_copies(_snapshot([bound, DHCP], [dict(bound), DHCP], [DHCP])) == []
    unbound_copy = _port("p9", owner="")  # a central port copied there, bound nowhere: no member
    assert invariants.bound_copies(_snapshot([bound, unbound_copy], [dict(bound)], [unbound_copy])) == []


def test_only_failures_outside_the_faulted_regions_count():
    ledger = Ledger()
    start = time.monotonic()
    ledger.note("RegionOne", "boot", False, "503")
    ledger.note("RegionTwo", "boot", False, "timeout")
    ledger.note("RegionTwo", "boot", True)
    end = time.monotonic()
    assert [r.region for r in ledger.failures(start, end, frozenset({"RegionOne"}))] == ["RegionTwo"]
    assert ledger.failures(start, end, frozenset({"*"})) == []  # a fault of every region (RabbitMQ)


def test_the_summary_has_a_row_per_kind():
    outcomes = [Outcome(["kill:isthmus-xjob"], 20, 12.0, [], []), Outcome(["kill:mariadb"], 20, None, ["x"], []),
                Outcome(["kill:neutron-RegionOne", "freeze:isthmus-admin"], 20, 30.0, [], ["RegionTwo boot"])]
    rows = {r["kind"]: r for r in summary(outcomes)}
    assert rows["kill"]["count"] == 2 and rows["kill"]["converge_max"] == 30.0
    assert rows["mariadb"]["not_converged"] == 1 and rows["mariadb"]["violations"] == 1
    assert rows["freeze"]["failed_elsewhere"] == 1


def test_every_service_a_campaign_kills_can_be_started_again(tmp_path):
    """A fault's lift restarts what it killed: each must have a starter (MariaDB had none)."""
    from isthmus.sandbox import plan

    layout = Layout(state_dir=tmp_path / "s")
    for name in fault_names(layout, ("kill",)) + ["kill:mariadb"]:
        service = name.split(":", 1)[1]
        assert callable(plan.starter(layout, service)), service
