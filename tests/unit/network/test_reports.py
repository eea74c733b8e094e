"""Binding reports to central: level-triggered, ordered, retried (pure logic
against an in-memory stand-in of the one REST client the plugin uses)."""

from __future__ import annotations

from typing import cast

import pytest

from isthmus.clients.neutron import Rejected, Unavailable
from isthmus.network import PROFILE_KEY
from isthmus.network.local.central import CentralClient
from isthmus.network.local.journal import DeleteJournal
from isthmus.network.local.reports import CentralReports


class Central:
    """Central's ports by id, with Neutron's revision_number and If-Match."""

    def __init__(self) -> None:
        self.ports: dict[str, dict] = {}
        self.down = False
        self.writes: list[tuple[str, dict]] = []

    def _check(self) -> None:
        if self.down:
            raise Unavailable("central down")

    def port(self, port_id: str) -> dict | None:
        self._check()
        port = self.ports.get(port_id)
        return dict(port) if port else None

    def update_port(self, port_id: str, changes: dict, if_revision: int | None = None) -> dict:
        self._check()
        port = self.ports[port_id]
        if if_revision is not None and port["revision_number"] != if_revision:
            raise Rejected(412, "revision changed")
        port.update(changes)
        port["revision_number"] += 1
        self.writes.append((port_id, changes))
        return port

    def delete_port(self, port_id: str) -> None:
        self._check()
        self.ports.pop(port_id, None)
        self.writes.append((port_id, {"deleted": True}))


def bound(region: str, host: str) -> dict:
    return {"binding:host_id": host, "device_owner": "compute:az", "device_id": "vm",
            "binding:profile": {PROFILE_KEY: {"region": region}}}


UNBOUND = {"binding:host_id": "", "device_owner": "", "device_id": "", "binding:profile": {}}


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def reports(region: str, central: Central, local: dict[str, dict], clock: Clock) -> CentralReports:
    # The fake answers the CentralClient calls the reports make.
    client = cast(CentralClient, central)
    return CentralReports(region, local.get, lambda: client, clock=clock, background=False)


def test_a_bind_is_sent_at_once_and_an_unbind_already_known_writes_nothing():
    central, clock = Central(), Clock()
    central.ports["p"] = {"id": "p", "revision_number": 1, **UNBOUND}
    local = {"p": bound("RegionOne", "h1")}
    r = reports("RegionOne", central, local, clock)
    r.report("p")  # at once: when the bind returns, central knows
    assert central.ports["p"]["binding:host_id"] == "h1" and r.pending() == {}
    local["p"] = dict(UNBOUND)
    r.report("p")
    r.report("p")
    assert central.ports["p"]["binding:host_id"] == "" and len(central.writes) == 2


def test_a_late_unbind_never_overwrites_the_newer_bind_of_another_region():
    central, clock = Central(), Clock()
    central.ports["p"] = {"id": "p", "revision_number": 5, **bound("RegionTwo", "h2")}
    one = reports("RegionOne", central, {"p": dict(UNBOUND)}, clock)
    one.report("p")
    assert central.ports["p"]["binding:host_id"] == "h2" and central.writes == [] and one.pending() == {}


def test_a_report_that_failed_is_retried_with_the_state_of_the_moment():
    central, clock = Central(), Clock()
    central.ports["p"] = {"id": "p", "revision_number": 1, **UNBOUND}
    local = {"p": bound("RegionOne", "h1")}
    r = reports("RegionOne", central, local, clock)
    central.down = True
    r.report("p")
    assert r.pending() == {"p": "report"}
    local["p"] = bound("RegionOne", "h9")  # it moved host meanwhile: the retry sends what is true now
    central.down = False
    clock.now += 0.6  # not due yet
    assert r.retry_due() == 1 and central.writes == []
    clock.now += 100
    assert r.retry_due() == 0
    assert central.ports["p"]["binding:host_id"] == "h9" and len(central.writes) == 1


def test_an_unbind_racing_a_change_at_central_reads_again_not_overwrites(monkeypatch: pytest.MonkeyPatch) -> None:
    central, clock = Central(), Clock()
    central.ports["p"] = {"id": "p", "revision_number": 1, **bound("RegionOne", "h1")}
    r = reports("RegionOne", central, {"p": dict(UNBOUND)}, clock)
    real = central.port

    def racing(port_id):  # another writer changes the port between our read and write
        port = real(port_id)
        central.ports["p"]["revision_number"] += 1
        return port

    monkeypatch.setattr(central, "port", racing)
    r.report("p")
    assert central.writes == [] and r.pending() == {"p": "report"}
    monkeypatch.setattr(central, "port", real)
    clock.now += 100
    r.retry_due()
    assert central.ports["p"]["binding:host_id"] == ""


def test_a_delete_made_while_central_was_down_reaches_central_unless_the_port_moved():
    central, clock = Central(), Clock()
    central.ports["gone"] = {"id": "gone", "revision_number": 1, **bound("RegionOne", "h")}
    central.ports["moved"] = {"id": "moved", "revision_number": 1, **bound("RegionTwo", "h2")}
    r = reports("RegionOne", central, {}, clock)
    r.deleted_here("gone")
    r.deleted_here("moved")
    clock.now += 100
    assert r.retry_due() == 0
    assert "gone" not in central.ports and "moved" in central.ports


def _nothing_here(port_id: str) -> dict | None:
    return None


def test_a_delete_central_missed_survives_a_restart_of_neutron_server(tmp_path):
    """Issue 25 hole 4: a port deleted here while central was down, then this
    neutron-server restarted (its queue in memory lost). Before: central kept
    the port (and its IP) for ever; binding_sync deleted only bound ones."""
    central, clock = Central(), Clock()
    central.ports["p"] = {"id": "p", "revision_number": 1, **UNBOUND}
    central.down = True
    journal = DeleteJournal(tmp_path / "deleted-ports")
    first = CentralReports("RegionOne", _nothing_here, lambda: cast(CentralClient, central), journal=journal,
                           clock=clock, background=False)
    first.will_delete("p")  # before the regional delete
    first.deleted_here("p")
    clock.now += 5
    first.retry_due()
    assert "p" in central.ports  # central still down
    central.down = False
    restarted = CentralReports("RegionOne", _nothing_here, lambda: cast(CentralClient, central),
                               journal=DeleteJournal(tmp_path / "deleted-ports"), clock=clock, background=False)
    assert restarted.retry_due() == 0
    assert "p" not in central.ports and journal.pending() == []


def test_a_journalled_port_that_exists_here_again_is_not_deleted_at_central(tmp_path):
    """The regional delete failed after the journal entry, or the region got the
    port back: the entry is dropped, central keeps the port."""
    central, clock = Central(), Clock()
    central.ports["p"] = {"id": "p", "revision_number": 1, **bound("RegionOne", "h1")}
    journal = DeleteJournal(tmp_path)
    journal.record("p")
    r = CentralReports("RegionOne", {"p": bound("RegionOne", "h1")}.get, lambda: cast(CentralClient, central),
                       journal=journal, clock=clock, background=False)
    assert r.retry_due() == 0
    assert "p" in central.ports and journal.pending() == []


def test_the_journal_is_one_durable_file_per_port_and_refuses_other_names(tmp_path):
    journal = DeleteJournal(tmp_path / "j")
    assert journal.pending() == []  # no directory yet
    journal.record("0b6e-41")
    journal.record("0b6e-41")
    (tmp_path / "j" / ".x.tmp").write_text("half-written")  # a crash mid-record
    assert journal.pending() == ["0b6e-41"]
    for bad in ("", "../x", "a/b", ".hidden"):
        with pytest.raises(ValueError):
            journal.record(bad)
    journal.forget("0b6e-41")
    journal.forget("0b6e-41")
    assert journal.pending() == []
