"""The real operator against the kmock emulator: the acceptance behaviours of the
operator (docs/operator.md) that need no real kube-apiserver."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.unit.operator.conftest import PASSWORDS
from tests.unit.operator.kmock_harness import NS, Operator, ini, make, registrations, secret, secret_file

pytestmark = [pytest.mark.asyncio, pytest.mark.component]  # the real operator against kmock (tests/tiers.py)



async def test_02_03_children_owned_and_initial_status(op: Operator) -> None:
    await make(op, apiGateway={"enabled": False})
    async def all_children():
        found = {kind: await op.list(kind) for kind in ("IdentityService", "Region", "CentralNetwork",
                                                        "APIGateway", "CloudControllerConfig")}
        counts = {kind: len(items) for kind, items in found.items()}
        return found if counts == {"IdentityService": 1, "Region": 2, "CentralNetwork": 1, "APIGateway": 0,
                                   "CloudControllerConfig": 1} else None

    children = await op.until(all_children, "exactly the enabled children")
    assert sorted(r["metadata"]["name"] for r in children["Region"]) == ["cloud-region-regionone",
                                                                         "cloud-region-regiontwo"]
    assert children["APIGateway"] == []
    mrc = await op.must_get("MultiRegionCloud", "cloud")
    for kind in ("IdentityService", "Region", "CentralNetwork", "CloudControllerConfig"):
        for child in children[kind]:
            (ref,) = child["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
                "MultiRegionCloud", "cloud", mrc["metadata"]["uid"], True)
            assert child["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "isthmus-operator"
            assert child["metadata"]["labels"]["app.kubernetes.io/part-of"] == "cloud"
    mrc = await op.until(lambda: op.get("MultiRegionCloud", "cloud"), "status",)
    await op.until(lambda: op.condition("MultiRegionCloud", "cloud", "RegionsReady"), "RegionsReady")
    mrc = await op.must_get("MultiRegionCloud", "cloud")
    status = mrc["status"]
    assert status["observedGeneration"] == mrc["metadata"]["generation"] == 1
    types = [c["type"] for c in status["conditions"]]
    assert types[0] == "Ready" and status["conditions"][0]["status"] in ("False", "Unknown")
    assert "APIGatewayReady" not in types
    assert {"IdentityReady", "RegionsReady", "CentralNetworkReady", "CloudControllerConfigReady"} <= set(types)


async def test_04_05_06_identity_service(op: Operator) -> None:
    await make(op, with_secret=False)
    ids = "cloud-identity"
    c = await op.wait_condition("IdentityService", ids, "InputReady", "False")
    assert c["reason"] == "SecretNotFound" and "passwords" in c["message"]
    assert await op.get("Deployment", ids) is None
    before = await op.must_get("IdentityService", ids)
    await op.create(secret("passwords", dict(PASSWORDS)))
    await op.wait_condition("IdentityService", ids, "InputReady", "True")
    config = await op.until(lambda: op.get("Secret", f"{ids}-config"), "config Secret")
    conf = ini(secret_file(config, "keystone.conf"))
    assert "db-pw@db.example" in conf["database"]["connection"]
    assert conf["cache"]["memcache_servers"] == "mc:11211"
    for keys in ("fernet-keys", "credential-keys"):
        assert set((await op.must_get("Secret", f"{ids}-{keys}"))["data"]) == {"0", "1"}
    await op.until(lambda: op.get("Job", f"{ids}-db-sync-0-1-0"), "db-sync Job")
    assert await op.get("Job", f"{ids}-bootstrap") is None  # only after db-sync succeeds
    await op.patch("Job", f"{ids}-db-sync-0-1-0", {"status": {"succeeded": 1}}, subresource="status")
    bootstrap = await op.until(lambda: op.get("Job", f"{ids}-bootstrap"), "bootstrap Job")
    env = {e["name"]: e.get("value") for e in bootstrap["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["OS_BOOTSTRAP_REGION_ID"] == "CentralRegion"
    for svc in ("public", "internal"):
        assert (await op.must_get("Service", f"{ids}-{svc}"))["spec"]["ports"][0]["port"] == 5000
    await op.converge("IdentityService", ids)
    ids_obj = await op.must_get("IdentityService", ids)
    assert ids_obj["status"]["apiEndpoints"] == {"public": "http://cloud-identity-public.ns1.svc:5000/v3",
                                                 "internal": "http://cloud-identity-internal.ns1.svc:5000/v3"}
    assert (await op.must_get("Deployment", ids))["spec"]["replicas"] == 1
    await op.wait_condition("MultiRegionCloud", "cloud", "IdentityReady", "True")
    # The CR itself was never touched by the Secret's arrival (spec and generation unchanged).
    assert ids_obj["spec"] == before["spec"] and ids_obj["metadata"]["generation"] == before["metadata"]["generation"]


async def test_07_region_waits_for_keystone(op: Operator) -> None:
    await make(op)
    region = "cloud-region-regionone"
    c = await op.wait_condition("Region", region, "IdentityReady", "False")
    assert c["reason"] == "Waiting"
    await asyncio.sleep(3)  # give the operator time to do what it must not do
    assert (await op.must_condition("Region", region, "IdentityReady"))["status"] == "False"
    assert await op.list("EndpointRegistration", **{"app.kubernetes.io/instance": region}) == []
    assert await op.get("Deployment", f"{region}-neutron") is None


async def test_08_region_neutron_config(op: Operator) -> None:
    await make(op)
    await op.converge("IdentityService", "cloud-identity")
    config = await op.until(lambda: op.get("Secret", "cloud-region-regiontwo-neutron-config"), "neutron config")
    conf = ini(secret_file(config, "neutron.conf"))
    assert conf["DEFAULT"]["core_plugin"] == "isthmus_local"
    assert conf["isthmus"]["central_region"] == "CentralRegion"
    assert conf["keystone_authtoken"]["auth_url"] == "http://cloud-identity-internal.ns1.svc:5000/v3"
    assert conf["keystone_authtoken"]["www_authenticate_uri"] == "http://cloud-identity-public.ns1.svc:5000/v3"
    assert conf["keystone_authtoken"]["region_name"] == "RegionTwo"


async def test_09_network_attachments(op: Operator) -> None:
    await make(op, regions=[{"name": "RegionOne", "neutron": {"networkAttachments": ["internalapi"]}}])
    region = "cloud-region-regionone"
    await op.converge("IdentityService", "cloud-identity")
    c = await op.wait_condition("Region", region, "NetworkAttachmentsReady", "False")
    assert c["reason"] == "NetworkAttachmentNotFound"
    assert (await op.must_condition("Region", region, "Ready"))["status"] == "False"
    assert await op.get("Deployment", f"{region}-neutron") is None
    await op.create({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                     "metadata": {"name": "internalapi"}, "spec": {"config": "{}"}})
    async def neutron_deployment():
        await op.simulate_ready()
        return await op.get("Deployment", f"{region}-neutron")

    try:
        await op.until(neutron_deployment, "neutron Deployment")
    except AssertionError as exc:
        got = await op.must_get("Region", region)
        raise AssertionError(f"{exc}: {got.get('status')}") from exc
    dep = await op.must_get("Deployment", f"{region}-neutron")
    networks = json.loads(dep["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
    assert networks == [{"name": "internalapi", "namespace": NS}]
    await op.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{region}-neutron-abc", "labels": dep["spec"]["template"]["metadata"]["labels"],
        "annotations": {"k8s.v1.cni.cncf.io/network-status": json.dumps(
            [{"name": f"{NS}/internalapi", "ips": ["172.17.0.31"]}])}}, "spec": {}})
    await op.wait_condition("Region", region, "NetworkAttachmentsReady", "True")
    assert (await op.must_get("Region", region))["status"]["networkAttachments"] == {"internalapi": ["172.17.0.31"]}


async def test_10_nova_toggles(op: Operator) -> None:
    await make(op, regions=[{"name": "RegionOne"}])
    region = "cloud-region-regionone"
    await op.converge("IdentityService", "cloud-identity")
    async def both():
        found = await registrations(op, region)
        return found if set(found) == {"identity", "network"} else None
    regs = await op.until(both, "identity and network registrations")
    assert regs["network"]["spec"]["region"] == "RegionOne"
    assert set(regs["network"]["spec"]["endpoints"]) == {"public", "internal"}
    await op.patch("MultiRegionCloud", "cloud", {"spec": {"regions": [{"name": "RegionOne", "nova": {
        "enabled": True}}]}})
    db_sync = await op.until(lambda: op.get("Job", f"{region}-nova-db-sync-0-1-0"), "nova-db-sync Job")
    await op.settle()
    assert await op.get("Deployment", f"{region}-nova-api") is None  # not before its schema Job succeeded
    assert "cell_v2 map_cell0" in " ".join(db_sync["spec"]["template"]["spec"]["containers"][0]["command"])
    async def nova_api():
        await op.simulate_ready()
        return await op.get("Deployment", f"{region}-nova-api")
    await op.until(nova_api, "nova-api Deployment")
    await op.until(lambda: op.get("Service", f"{region}-nova-public"), "nova-api Service")
    await op.until(lambda: _has(op, region, "compute"), "compute registration")
    await op.until(lambda: op.condition("Region", region, "NovaReady"), "NovaReady")
    await op.patch("MultiRegionCloud", "cloud", {"spec": {"regions": [{"name": "RegionOne", "nova": {
        "enabled": True, "mode": "External", "externalEndpoints": {"public": "https://n/v2.1",
                                                                   "internal": "http://n-int/v2.1"}}}]}})
    await op.until(lambda: _gone(op, "Deployment", f"{region}-nova-api"), "nova-api deleted")
    compute = (await registrations(op, region))["compute"]
    await op.until(lambda: _endpoint(op, region, "https://n/v2.1"), "external URL registered")
    await op.patch("MultiRegionCloud", "cloud", {"spec": {"regions": [{"name": "RegionOne", "nova": None}]}})
    async def deregistered():
        # Removing a registered service runs a deregister Job first (its finalizer); complete it.
        await op.simulate_ready()
        return await _not_has(op, region, "compute")
    await op.until(deregistered, "compute registration removed")
    await op.until(lambda: _no_condition(op, region, "NovaReady"), "NovaReady removed")
    assert compute is not None


async def _has(op: Operator, owner: str, service_type: str) -> bool:
    return service_type in await registrations(op, owner)


async def _not_has(op: Operator, owner: str, service_type: str) -> bool:
    return service_type not in await registrations(op, owner)


async def _gone(op: Operator, kind: str, name: str) -> bool:
    return await op.get(kind, name) is None


async def _endpoint(op: Operator, owner: str, url: str) -> bool:
    regs = await registrations(op, owner)
    return "compute" in regs and regs["compute"]["spec"]["endpoints"]["public"] == url


async def _no_condition(op: Operator, region: str, type_: str) -> bool:
    return await op.condition("Region", region, type_) is None


async def test_18_19_idempotent_restart_and_drift(op: Operator) -> None:
    await make(op, regions=[{"name": "RegionOne"}], apiGateway={"enabled": False},
               centralNetwork={"enabled": False}, cloudControllerManager={"enabled": False})
    ids = "cloud-identity"
    await op.converge("IdentityService", ids)
    fernet = (await op.must_get("Secret", f"{ids}-fernet-keys"))["data"]
    await asyncio.sleep(2)
    before = op.versions()
    # A restart (and the resync tick that comes with it) writes nothing.
    await op.restart()
    await asyncio.sleep(4)
    after = op.versions()
    # No object the operator had written was written again (new objects of the Region,
    # which was still waiting on Keystone, may appear).
    assert {key: after.get(key) for key in before} == before
    assert (await op.must_get("Secret", f"{ids}-fernet-keys"))["data"] == fernet
    # Drift: a deleted Service comes back; a hand-scaled Deployment is scaled back.
    await op.delete("Service", f"{ids}-public")
    await op.until(lambda: op.get("Service", f"{ids}-public"), "Service recreated")
    await op.patch("Deployment", ids, {"spec": {"replicas": 5}})

    async def scaled_back():
        dep = await op.must_get("Deployment", ids)
        return dep["spec"]["replicas"] == 1
    await op.until(scaled_back, "Deployment scaled back")


async def test_20_25_propagation_and_stable_transition_times(op: Operator) -> None:
    await make(op, regions=[{"name": "RegionOne"}], apiGateway={"enabled": False},
               centralNetwork={"enabled": False}, cloudControllerManager={"enabled": False})
    ids = "cloud-identity"
    await op.converge("IdentityService", ids)
    ready = await op.condition("IdentityService", ids, "Ready")
    await asyncio.sleep(2)
    assert await op.condition("IdentityService", ids, "Ready") == ready  # 25: time kept when nothing changes
    conditions = (await op.must_get("IdentityService", ids))["status"]["conditions"]
    assert conditions[0]["type"] == "Ready"
    assert [c["type"] for c in conditions[1:]] == sorted(c["type"] for c in conditions[1:])
    await op.patch("MultiRegionCloud", "cloud", {"spec": {"identity": {"replicas": 3}}})

    async def propagated():
        child = await op.must_get("IdentityService", ids)
        dep = await op.must_get("Deployment", ids)
        return child["spec"]["replicas"] == 3 and dep["spec"]["replicas"] == 3 and child
    child = await op.until(propagated, "replicas propagated to the child and its Deployment")
    assert child["metadata"]["generation"] == 2
    await op.wait_condition("IdentityService", ids, "Ready", "False")  # 3 replicas not ready yet
    mrc = await op.must_get("MultiRegionCloud", "cloud")
    assert mrc["status"]["observedGeneration"] == mrc["metadata"]["generation"] == 2
    await op.converge("IdentityService", ids)
    assert (await op.must_get("IdentityService", ids))["status"]["observedGeneration"] == 2
