"""The global-object handlers against in-memory regions: idempotent, converge, never
delete on an inline check."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any, cast

import pytest

from isthmus.gateway import sync
from isthmus.jobs import JobContext


class Resp:
    def __init__(self, status, body=None, method="GET", url=""):
        self.status_code, self._body = status, body
        self.request, self.url, self.text = SimpleNamespace(method=method), url, str(body)

    def json(self):
        return self._body


class FakeRegions:
    """Just enough Nova/Cinder: flavors (+extra specs, access), keypairs, volume types."""

    def __init__(self, names):
        self.names = names
        self.flavors: dict[str, dict[str, Any]] = {n: {} for n in names}
        self.keys: dict[str, dict[str, Any]] = {n: {} for n in names}
        self.types: dict[str, dict[str, Any]] = {n: {} for n in names}
        self.calls = []

    def regions(self):
        return list(self.names)

    def call(self, method, region, service, path, version=None, json=None, **_):
        self.calls.append((method, region, path))
        path = path.split("?")[0]
        fl, ks, ts = self.flavors[region], self.keys[region], self.types[region]
        if m := re.fullmatch(r"/flavors/([^/]+)", path):
            fid = m.group(1)
            if method == "GET":
                return Resp(200, {"flavor": fl[fid]["flavor"]}) if fid in fl else Resp(404)
            if method == "DELETE":
                return Resp(202) if fl.pop(fid, None) else Resp(404)
        if path == "/flavors" and method == "POST":
            body = dict(json["flavor"])
            fl[body["id"]] = {"flavor": body, "specs": {}, "access": set()}
            return Resp(200, {"flavor": body})
        if m := re.fullmatch(r"/flavors/([^/]+)/os-extra_specs(?:/(.+))?", path):
            entry = fl[m.group(1)]
            if method == "GET":
                return Resp(200, {"extra_specs": dict(entry["specs"])})
            if method == "POST":
                entry["specs"].update(json["extra_specs"])
                return Resp(200, {"extra_specs": entry["specs"]})
            entry["specs"].pop(m.group(2), None)
            return Resp(200)
        if m := re.fullmatch(r"/flavors/([^/]+)/os-flavor-access", path):
            return Resp(200, {"flavor_access": [{"tenant_id": t} for t in fl[m.group(1)]["access"]]})
        if m := re.fullmatch(r"/flavors/([^/]+)/action", path):
            (action, arg), = json.items()
            getattr(fl[m.group(1)]["access"], "add" if action == "addTenantAccess" else "discard")(arg["tenant"])
            return Resp(200)
        if m := re.fullmatch(r"/os-keypairs/([^/]+)", path):
            name = m.group(1)
            if method == "GET":
                return Resp(200, {"keypair": ks[name]}) if name in ks else Resp(404)
            return Resp(202) if ks.pop(name, None) else Resp(404)
        if path == "/os-keypairs":
            ks[json["keypair"]["name"]] = dict(json["keypair"])
            return Resp(200, {"keypair": json["keypair"]})
        if path == "/types" and method == "GET":
            return Resp(200, {"volume_types": list(ts.values())})
        if path == "/types" and method == "POST":
            body = {**json["volume_type"], "id": f"{region}-{json['volume_type']['name']}"}
            ts[body["id"]] = body
            return Resp(200, {"volume_type": body})
        if m := re.fullmatch(r"/types/([^/]+)", path):
            tid = m.group(1)
            if method == "GET":
                return Resp(200, {"volume_type": ts[tid]}) if tid in ts else Resp(404)
            return Resp(202) if ts.pop(tid, None) else Resp(404)
        raise AssertionError(f"unexpected {method} {path}")


def ctx(resource, **payload):
    return JobContext("j", "t", resource, None, {"master": "A", **payload}, 1)


FLAVOR = {"id": "f1", "name": "small", "ram": 64, "vcpus": 1, "disk": 1, "OS-FLV-EXT-DATA:ephemeral": 0,
          "swap": "", "rxtx_factor": 1.0, "os-flavor-access:is_public": False}


def test_flavor_created_replaced_and_deleted_everywhere():
    regions = FakeRegions(["A", "B", "C"])
    regions.flavors["A"]["f1"] = {"flavor": dict(FLAVOR), "specs": {"k": "v"}, "access": {"p1"}}
    regions.flavors["C"]["f1"] = {"flavor": {**FLAVOR, "ram": 32}, "specs": {"old": "x"}, "access": {"p9"}}
    sync.sync_flavor(regions, ctx("f1"))
    for region in "BC":
        entry = regions.flavors[region]["f1"]
        assert entry["flavor"]["ram"] == 64 and entry["specs"] == {"k": "v"} and entry["access"] == {"p1"}
    before = len(regions.calls)
    sync.sync_flavor(regions, ctx("f1"))  # idempotent: nothing to write
    assert not [c for c in regions.calls[before:] if c[0] != "GET"]
    del regions.flavors["A"]["f1"]
    sync.sync_flavor(regions, ctx("f1"))
    assert regions.flavors == {"A": {}, "B": {}, "C": {}}


def test_inline_flavor_sync_touches_only_the_target():
    regions = FakeRegions(["A", "B", "C"])
    regions.flavors["A"]["f1"] = {"flavor": dict(FLAVOR), "specs": {}, "access": set()}
    sync.sync_flavor(regions, ctx("f1", only="C"))
    assert "f1" in regions.flavors["C"] and "f1" not in regions.flavors["B"]


def test_keypair_follows_the_master():
    regions = FakeRegions(["A", "B"])
    regions.keys["A"]["k"] = {"name": "k", "public_key": "ssh-ed25519 AAA", "type": "ssh"}
    regions.keys["B"]["k"] = {"name": "k", "public_key": "ssh-ed25519 OLD", "type": "ssh"}
    sync.sync_keypair(regions, ctx("u1/k"))
    assert regions.keys["B"]["k"]["public_key"] == "ssh-ed25519 AAA" and regions.keys["B"]["k"]["user_id"] == "u1"
    del regions.keys["A"]["k"]
    sync.sync_keypair(regions, ctx("u1/k"))
    assert regions.keys["B"] == {}


def test_volume_type_by_name_and_inline_never_deletes():
    regions = FakeRegions(["A", "B"])
    regions.types["A"]["t1"] = {"id": "t1", "name": "gold", "is_public": True, "extra_specs": {"x": "1"}}
    sync.sync_volume_type(regions, ctx("t1"))
    (copy,) = regions.types["B"].values()
    assert copy["name"] == "gold" and copy["extra_specs"] == {"x": "1"}
    sync.sync_volume_type(regions, ctx("gold-unknown-at-master", name="gold", inline=True))
    assert len(regions.types["B"]) == 1  # an inline check with no master type deletes nothing
    del regions.types["A"]["t1"]
    sync.sync_volume_type(regions, ctx("t1", name="gold"))
    assert regions.types["B"] == {}


def test_inline_flavor_sync_before_a_users_create_never_deletes_or_replaces():
    """A user's server create runs the flavor sync with service credentials: it may
    add a missing master flavor to the target region, never delete or replace one."""
    regions = FakeRegions(["A", "B"])
    regions.flavors["B"]["only-here"] = {"flavor": {**FLAVOR, "id": "only-here"}, "specs": {}, "access": set()}
    regions.flavors["A"]["f1"] = {"flavor": dict(FLAVOR), "specs": {}, "access": set()}
    regions.flavors["B"]["f1"] = {"flavor": {**FLAVOR, "ram": 32}, "specs": {}, "access": set()}
    sync.sync_flavor(regions, ctx("only-here", only="B", inline=True))
    sync.sync_flavor(regions, ctx("f1", only="B", inline=True))
    assert "only-here" in regions.flavors["B"] and regions.flavors["B"]["f1"]["flavor"]["ram"] == 32
    assert not [c for c in regions.calls if c[0] != "GET"]


def test_inline_volume_type_sync_finds_the_masters_type_by_name():
    """A create names its type by name as often as by id; Cinder's GET by id
    takes no name, so the master's list answers (the type reaches the target
    before the create, not only when the background job gets to it)."""
    regions = FakeRegions(["A", "B"])
    regions.types["A"]["t1"] = {"id": "t1", "name": "gold", "is_public": True, "extra_specs": {}}
    sync.sync_volume_type(regions, ctx("gold", name="gold", only="B", inline=True))
    assert [t["name"] for t in regions.types["B"].values()] == ["gold"]


def test_region_calls_stop_at_the_job_runners_guard():
    """Issue 25 hole 5: the gateway's sync handlers went on calling regions after
    their job's lease was lost (no call guard)."""
    from isthmus import callguard
    from isthmus.gateway.sync import Regions
    from isthmus.jobs import Stopped

    requests = []

    class Session:
        def request(self, *args, **kwargs):
            requests.append(args)

    regions = Regions.fixed(cast(Any, Session()), lambda: ["A"])

    def stop():
        raise Stopped("lease lost")

    with callguard.installed(stop), pytest.raises(Stopped):
        regions.call("GET", "A", "compute", "/flavors")
    assert requests == []
    regions.call("GET", "A", "compute", "/flavors")  # no guard: it goes
    assert len(requests) == 1
