"""Central mechanism driver: which project's security groups a rule event syncs,
and every delete recorded before it commits."""

from types import SimpleNamespace

import pytest
import sqlalchemy as sa
from neutron_lib import exceptions as n_exc
from neutron_lib.callbacks import events, resources

from isthmus.network import jobtypes
from isthmus.network.central import mech_driver


class _Context:
    project_id = "admin-project"

    def elevated(self):
        return self


class _Plugin:
    def get_security_group(self, context, group_id, fields=None):
        return {"id": group_id, "project_id": "owner-project"}


class _Jobs:
    def __init__(self):
        self.queued = []

    def enqueue(self, job_type, resource_id, project_id=None):
        self.queued.append((job_type, resource_id))


class _Tombstones:
    def __init__(self):
        self.buried = []
        self.down = False

    def bury(self, resource_type, resource_id, project_id=None, attempts=8):
        if self.down:
            raise sa.exc.OperationalError("INSERT", {}, Exception("database is locked"))
        self.buried.append((resource_type, resource_id, project_id))


class _State:
    def __init__(self):
        self.jobs = _Jobs()
        self.tombstones = _Tombstones()


def _driver(monkeypatch, state=None):
    state = state or _State()
    monkeypatch.setattr(mech_driver, "state", lambda: state)
    monkeypatch.setattr(mech_driver.directory, "get_plugin", lambda: _Plugin())
    return mech_driver.CentralMechanismDriver(), state.jobs.queued


def test_an_admin_deleting_a_rule_of_another_project_syncs_the_group_owner(monkeypatch):
    driver, queued = _driver(monkeypatch)
    # AFTER_DELETE carries only the group id, in its metadata.
    payload = events.DBEventPayload(_Context(), resource_id="rule", metadata={"security_group_id": "g"})
    driver._security_group_rule_changed(resources.SECURITY_GROUP_RULE, events.AFTER_DELETE, None, payload)
    assert queued == [(jobtypes.SECURITY_GROUP_SYNC, "owner-project")]


def test_an_admin_adding_a_rule_syncs_the_group_owner_not_the_rule_project(monkeypatch):
    driver, queued = _driver(monkeypatch)
    rule = {"id": "rule", "security_group_id": "g", "project_id": "admin-project"}
    payload = events.DBEventPayload(_Context(), resource_id="rule", states=(rule,))
    driver._security_group_rule_changed(resources.SECURITY_GROUP_RULE, events.AFTER_CREATE, None, payload)
    assert queued == [(jobtypes.SECURITY_GROUP_SYNC, "owner-project")]


def _deletes(driver):
    """Each delete as central's plugin announces it before its commit."""
    context = SimpleNamespace(current={"id": "x1", "project_id": "p"})
    router_row = SimpleNamespace(id="r1", project_id="p")  # the L3 plugin passes its DB row
    return {
        "port": lambda: driver.delete_port_precommit(context),
        "network": lambda: driver.delete_network_precommit(context),
        "subnet": lambda: driver.delete_subnet_precommit(context),
        "security_group": lambda: driver._security_group_deleting(
            resources.SECURITY_GROUP, events.PRECOMMIT_DELETE, None,
            events.DBEventPayload(_Context(), resource_id="x1", states=({"id": "x1", "project_id": "p"},))),
        "router": lambda: driver._router_deleting(
            resources.ROUTER, events.PRECOMMIT_DELETE, None,
            events.DBEventPayload(_Context(), resource_id="r1", states=(router_row,))),
    }


@pytest.mark.parametrize("resource", ["port", "network", "subnet", "security_group", "router"])
def test_every_delete_is_recorded_before_it_commits(monkeypatch, resource):
    state = _State()
    driver, _ = _driver(monkeypatch, state)
    _deletes(driver)[resource]()
    assert state.tombstones.buried == [(resource, "r1" if resource == "router" else "x1", "p")]


@pytest.mark.parametrize("resource", ["port", "network", "subnet", "security_group", "router"])
def test_a_delete_whose_record_cannot_be_written_is_refused_with_a_503(monkeypatch, resource):
    """Before: the tombstone was written after the commit; with the Isthmus DB
    down then, the delete went through unrecorded and its copies stayed for ever."""
    state = _State()
    state.tombstones.down = True
    driver, _ = _driver(monkeypatch, state)
    with pytest.raises(mech_driver.DeleteNotRecorded) as refused:
        _deletes(driver)[resource]()
    assert isinstance(refused.value, n_exc.ServiceUnavailable)  # Neutron's fault map: 503
    assert resource in str(refused.value) and "nothing was deleted" in str(refused.value)


def _port(region=None, host="", mac="fa:16:3e:00:00:01", name="vm"):
    from isthmus.network import PROFILE_KEY

    port = {"id": "p", "mac_address": mac, "name": name, "binding:host_id": host, "binding:profile": {}}
    if region:
        port["binding:profile"] = {PROFILE_KEY: {"region": region}}
    return port


def test_only_a_first_bind_with_nothing_else_changed_is_hinted():
    unbound, bound = _port(), _port("RegionOne", "h1")
    assert mech_driver._first_bind_region(bound, unbound, copy_changed=False) == "RegionOne"
    assert mech_driver._first_bind_region(bound, unbound, copy_changed=True) is None  # a field changed too
    assert mech_driver._first_bind_region(_port("RegionTwo", "h2"), bound, copy_changed=False) is None  # a move
    assert mech_driver._first_bind_region(bound, _port(host="h0"), copy_changed=False) is None  # bound before
    assert mech_driver._first_bind_region(_port("RegionOne", "h1", mac="fa:16:3e:00:00:02"), unbound,
                                          copy_changed=False) is None  # its MAC changed
    assert mech_driver._first_bind_region(unbound, bound, copy_changed=False) is None  # an unbind
