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
        self.quotas: dict[str, dict[str, int]] = {n: {} for n in names}
        self.calls = []

    def regions(self):
        return list(self.names)

    def master(self):
        return None

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
        if m := re.fullmatch(r"/os-quota-sets/([^/]+)", path):
            if method == "GET":
                return Resp(200, {"quota_set": {"id": m.group(1), **self.quotas[region]}})
            self.quotas[region].update(json["quota_set"])
            return Resp(200, {"quota_set": self.quotas[region]})
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


def test_a_resync_never_deletes_what_the_master_lacks():
    """A resync enqueues what the master's list held; an object gone by the time its
    job runs is no proof of a delete (only the gateway's delete event is)."""
    regions = FakeRegions(["A", "B"])
    regions.flavors["B"]["f1"] = {"flavor": dict(FLAVOR), "specs": {}, "access": set()}
    regions.keys["B"]["k"] = {"name": "k", "public_key": "ssh-ed25519 AAA", "type": "ssh"}
    regions.types["B"]["t1"] = {"id": "t1", "name": "gold", "is_public": True, "extra_specs": {}}
    sync.sync_flavor(regions, ctx("f1", resync=True))
    sync.sync_keypair(regions, ctx("u1/k", resync=True))
    sync.sync_volume_type(regions, ctx("t1", name="gold", resync=True))
    assert "f1" in regions.flavors["B"] and "k" in regions.keys["B"] and "t1" in regions.types["B"]
    assert not [c for c in regions.calls if c[0] != "GET"]


def test_a_resync_repairs_drift_made_around_the_gateway():
    regions = FakeRegions(["A", "B"])
    regions.flavors["A"]["f1"] = {"flavor": dict(FLAVOR), "specs": {"k": "v"}, "access": set()}
    regions.flavors["B"]["f1"] = {"flavor": dict(FLAVOR), "specs": {"k": "changed in B"}, "access": set()}
    sync.sync_flavor(regions, ctx("f1", resync=True))
    assert regions.flavors["B"]["f1"]["specs"] == {"k": "v"}


def test_quota_sync_writes_only_what_differs():
    regions = FakeRegions(["A", "B"])
    regions.quotas["A"] = {"instances": 5, "cores": 10}
    regions.quotas["B"] = {"instances": 5, "cores": 20}
    sync.sync_quota(regions, ctx("p1"))
    assert regions.quotas["B"] == {"instances": 5, "cores": 10}
    assert ("PUT", "B", "/os-quota-sets/p1") in regions.calls
    before = len(regions.calls)
    sync.sync_quota(regions, ctx("p1", resync=True))  # nothing differs: reads only
    assert [c[0] for c in regions.calls[before:]] == ["GET", "GET"]


def test_resync_listers_page_to_the_end(monkeypatch):
    from isthmus.gateway import resync

    monkeypatch.setattr(resync, "PAGE", 2)
    flavors = [{"id": f"f{i}"} for i in range(5)]
    asked = []

    def compute(path, version=None):
        asked.append(path)
        marker = path.partition("marker=")[2]
        start = next((i + 1 for i, f in enumerate(flavors) if f["id"] == marker), 0)
        return Resp(200, {"flavors": flavors[start:start + 2]})

    refs = list(resync.flavors(compute, "A"))
    assert [r.resource_id for r in refs] == [f["id"] for f in flavors]
    assert all(r.payload == {"master": "A", "resync": True} for r in refs)
    assert len(asked) == 3

    users = Resp(200, {"users": [{"id": "u1"}, {"id": "u2"}]})
    keys = {"u1": [{"keypair": {"name": "a"}}], "u2": []}

    def nova(path, version=None):
        assert version == "2.35"
        return Resp(200, {"keypairs": keys[path.split("user_id=")[1].split("&")[0]]})

    assert [r.resource_id for r in resync.keypairs(nova, lambda path: users, "A")] == ["u1/a"]
    projects = Resp(200, {"projects": [{"id": "p1"}]})
    assert [(r.resource_id, r.payload.get("service")) for r in resync.quotas(
        lambda path: projects, "A", ("compute", "volume"))] == [("p1", None), ("volume/p1", "volume")]
    with pytest.raises(RuntimeError, match="403"):
        list(resync.flavors(lambda path, version=None: Resp(403), "A"))


def test_the_resync_runs_only_where_the_worker_knows_the_master(tmp_path):
    from oslo_config import cfg

    from isthmus.jobs import HandlerRegistry

    def registered(*args: str) -> set[str]:
        conf = cfg.ConfigOpts()
        conf([*args], default_config_files=[])
        registry = HandlerRegistry()
        sync.register_handlers(registry, conf)
        return {spec.job_type for spec in registry.resyncs()}

    assert registered() == set()  # a guessed master could copy one region over the others
    conf_file = tmp_path / "xjob.conf"
    conf_file.write_text("[gateway_sync]\nmaster_region = RegionOne\n")
    assert registered("--config-file", str(conf_file)) == {
        sync.FLAVOR_SYNC, sync.KEYPAIR_SYNC, sync.QUOTA_SYNC, sync.VOLUME_TYPE_SYNC}


def test_a_keypair_write_names_someone_else_only_for_an_admin():
    """Issue 26 item 4: a non-admin's ``POST /os-keypairs?user_id=<victim>`` queued a
    sync of the victim's keypair (and removed it in another region)."""
    from isthmus.gateway.auth import Identity
    from isthmus.gateway.globals import keypair_owner

    user = Identity("t", "me", "p", frozenset({"member"}))
    admin = Identity("t", "root", "p", frozenset({"admin"}))
    assert keypair_owner("POST", "user_id=victim", user, {"name": "k", "user_id": "me"}) == "me"
    assert keypair_owner("POST", "user_id=victim", user, {"name": "k"}) == "me"
    assert keypair_owner("DELETE", "user_id=victim", user, {}) == "me"
    assert keypair_owner("DELETE", "user_id=victim", admin, {}) == "victim"
    assert keypair_owner("POST", "", admin, {"name": "k", "user_id": "victim"}) == "victim"


def test_an_inline_volume_type_sync_never_rewrites_a_regions_extra_specs():
    regions = FakeRegions(["A", "B"])
    regions.types["A"]["t1"] = {"id": "t1", "name": "gold", "is_public": True, "extra_specs": {"x": "master"}}
    regions.types["B"]["b1"] = {"id": "b1", "name": "gold", "is_public": True, "extra_specs": {"x": "region's"}}
    sync.sync_volume_type(regions, ctx("gold", name="gold", only="B", inline=True))
    assert regions.types["B"]["b1"]["extra_specs"] == {"x": "region's"}
    assert not [c for c in regions.calls if c[0] != "GET"]


def test_names_from_user_input_are_quoted_in_region_paths():
    regions = FakeRegions(["A", "B"])
    sync.sync_keypair(regions, ctx("u1/../../os-services?x=", resync=True))
    sync.sync_flavor(regions, ctx("f/../../servers", resync=True))
    paths = [c[2] for c in regions.calls]
    assert paths == ["/os-keypairs/..%2F..%2Fos-services%3Fx%3D?user_id=u1", "/flavors/f%2F..%2F..%2Fservers"]
