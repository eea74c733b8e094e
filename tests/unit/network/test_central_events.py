"""Central mechanism driver: which project's security groups a rule event syncs."""

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


class _State:
    def __init__(self):
        self.jobs = _Jobs()


def _driver(monkeypatch):
    state = _State()
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
