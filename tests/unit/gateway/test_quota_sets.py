"""Per-user quota writes: what is propagated, and the job against in-memory regions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from isthmus.gateway.faults import Fault
from isthmus.gateway.quota_sets import UserQuotaWrite, checked_user_id, user_quota_write
from isthmus.gateway.sync import sync_user_quota
from isthmus.jobs import JobContext
from tests.unit.gateway.test_sync import Resp

P, U = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"


def test_user_quota_write_of_a_put_names_its_keys():
    body = json.dumps({"quota_set": {"instances": 2, "cores": 4, "force": True}}).encode()
    assert user_quota_write(["os-quota-sets", P], f"user_id={U}", "PUT", body) == \
        UserQuotaWrite(P, U, ("cores", "instances"), False)
    assert user_quota_write(["os-quota-sets", P], f"user_id={U}", "DELETE", b"") == UserQuotaWrite(P, U, (), True)


def test_project_writes_and_reads_are_not_user_writes():
    body = json.dumps({"quota_set": {"instances": 2}}).encode()
    assert user_quota_write(["os-quota-sets", P], "", "PUT", body) is None
    assert user_quota_write(["os-quota-sets", P], f"user_id={U}", "GET", b"") is None
    assert user_quota_write(["os-quota-sets", P, "defaults"], f"user_id={U}", "PUT", body) is None
    assert user_quota_write(["os-quota-sets", P], f"user_id={U}", "PUT", b"{") is None


@pytest.mark.parametrize("query", ["user_id=a/b", "user_id=x%3Fy%3Dz", "user_id=", "user_id=" + "a" * 256])
def test_a_user_id_that_is_not_one_is_a_400_naming_it(query):
    with pytest.raises(Fault) as err:
        checked_user_id(query)
    assert err.value.status == 400 and "user_id" in err.value.message


def test_checked_user_id_lets_ids_and_no_id_through():
    checked_user_id("")
    checked_user_id(f"user_id={U}")
    checked_user_id("tenant_id=x")


class UserQuotaRegions:
    def __init__(self, names):
        self.names = names
        self.users: dict[str, dict[str, Any]] = {n: {} for n in names}  # region -> the user's own limits
        self.calls = []

    def regions(self):
        return list(self.names)

    def master(self):
        return None

    def call(self, method, region, service, path, version=None, json=None, **_):
        self.calls.append((method, region, path))
        assert path == f"/os-quota-sets/{P}?user_id={U}" and service == "compute"
        if method == "GET":
            return Resp(200, {"quota_set": {"instances": 10, "cores": 20, **self.users[region], "id": P}})
        if method == "PUT":
            self.users[region].update(json["quota_set"])
            return Resp(200, {"quota_set": json["quota_set"]})
        if method == "DELETE":
            self.users[region] = {}
            return Resp(202)
        raise AssertionError(method)


def ctx(payload):
    return JobContext("j", "gateway_user_quota_sync", f"{P}/{U}", P, {"master": "RegionOne", **payload}, 1)


def test_job_sets_the_written_keys_in_every_other_region_then_deletes():
    regions = UserQuotaRegions(["RegionOne", "RegionTwo", "RegionThree"])
    regions.users["RegionOne"] = {"instances": 3}
    sync_user_quota(regions, ctx({"keys": ["instances"]}))
    assert regions.users == {"RegionOne": {"instances": 3}, "RegionTwo": {"instances": 3},
                             "RegionThree": {"instances": 3}}
    sync_user_quota(regions, ctx({"keys": ["instances"]}))  # idempotent
    assert regions.users["RegionTwo"] == {"instances": 3}
    assert not [c for c in regions.calls if c[1] == "RegionOne" and c[0] != "GET"]
    sync_user_quota(regions, ctx({"deleted": True}))
    assert regions.users["RegionTwo"] == {} and regions.users["RegionThree"] == {}
    assert regions.users["RegionOne"] == {"instances": 3}  # the master is the gateway's write, not the job's


@pytest.mark.parametrize("query, wanted", [("usage=True", True), ("usage=true", True), ("usage=1", True),
                                           ("usage=False", False), ("", False), ("usage=x", False)])
def test_wants_usage(query, wanted):
    from isthmus.gateway.quota_sets import wants_usage

    assert wants_usage(query) is wanted
