"""The real operator against the kmock emulator: central networking. Where Isthmus departs
from the upstream operators' wording (docs/operator.md, "Departures"), the tests follow the
implementation: Isthmus option names,
the Admin API registered as service type ``multiregion`` (name ``isthmus``), no
bridge_network_type/default_region_for_external_network, and the range rule (region VNIs
disjoint from central's, central's VLAN ranges within the region's)."""

from __future__ import annotations

from typing import Any

import pytest

from isthmus.operator import API_VERSION, controllers
from tests.unit.operator.kmock_harness import (
    NS,
    Operator,
    ServerLikeKube,
    ini,
    make,
    register_resources,
    registrations,
    secret_file,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.component]  # the real operator against kmock (tests/tiers.py)

CNET = "cloud-central-network"
ONE, TWO = "cloud-region-regionone", "cloud-region-regiontwo"
# What a test does not need stays off (the tier's cost is requests per reconcile).
LEAN: dict[str, Any] = {"apiGateway": {"enabled": False}, "cloudControllerManager": {"enabled": False}}



def container(obj: dict[str, Any]) -> dict[str, Any]:
    (only,) = obj["spec"]["template"]["spec"]["containers"]
    return only


async def registered_regions(op: Operator) -> list[dict[str, str]] | None:
    cnet = await op.get("CentralNetwork", CNET)
    return ((cnet or {}).get("status") or {}).get("registeredRegions")


async def pods_jobs(op: Operator) -> dict[str, list[str]]:
    """Central's pods-registration Jobs: name -> the REGION:AZ arguments of ensure-pods."""
    out = {}
    for job in await op.list("Job", **{"isthmus.dev/pods-job": "true"}):
        command = container(job)["command"]
        out[job["metadata"]["name"]] = command[command.index("ensure-pods") + 1:]
    return out


async def deregister_jobs(op: Operator) -> list[tuple[tuple[str, str], dict[str, Any]]]:
    """The deregistration Jobs (``register-endpoint --delete``) as ((service type, region), Job)."""
    out = []
    for job in await op.list("Job"):
        command = container(job)["command"]
        if "--delete" in command:
            out.append(((command[command.index("--service-type") + 1], command[command.index("--region") + 1]), job))
    return sorted(out, key=lambda item: item[0])


async def complete(op: Operator, jobs: list[dict[str, Any]]) -> None:
    for job in jobs:
        if not (job.get("status") or {}).get("succeeded"):
            await op.patch("Job", job["metadata"]["name"], {"status": {"succeeded": 1, "conditions": [
                {"type": "Complete", "status": "True"}]}}, subresource="status")


async def _gone(op: Operator, kind: str, name: str) -> bool:
    return await op.get(kind, name) is None


async def test_12_central_network(op: Operator) -> None:
    await make(op, regions=[{"name": "RegionOne"}], **LEAN, centralNetwork={
        "replicas": 2, "typeDrivers": ["vlan", "vxlan"], "tenantNetworkTypes": ["vxlan", "vlan"],
        "networkVlanRanges": ["physnet1:200:300", "physnet2:10:20"], "vniRanges": ["1:5000"],
        "flatNetworks": ["extnet"], "adminAPI": {"port": 19990}, "xjob": {"replicas": 3}})
    await op.converge("CentralNetwork", CNET)

    # Deployments: central Neutron, the Admin API and xjob, with the spec's replicas.
    deployments = {name: await op.must_get("Deployment", f"{CNET}-{name}") for name in ("neutron", "admin-api", "xjob")}
    assert {name: dep["spec"]["replicas"] for name, dep in deployments.items()} == {
        "neutron": 2, "admin-api": 1, "xjob": 3}
    assert container(deployments["admin-api"])["command"][:1] == ["isthmus-admin"]
    assert container(deployments["admin-api"])["ports"] == [{"name": "api", "containerPort": 19990}]
    assert container(deployments["xjob"])["command"][:1] == ["isthmus-xjob"]
    assert container(deployments["neutron"])["command"][-1] == "neutron.wsgi.api:application"
    for dep in deployments.values():
        assert dep["metadata"]["labels"]["isthmus.dev/region"] == "CentralRegion"
    # Services, each selecting its Deployment's pods.
    backends = {"neutron-public": "neutron", "neutron-internal": "neutron", "admin-api": "admin-api"}
    services = {name: await op.must_get("Service", f"{CNET}-{name}") for name in backends}
    assert {name: svc["spec"]["ports"][0]["port"] for name, svc in services.items()} == {
        "neutron-public": 9696, "neutron-internal": 9696, "admin-api": 19990}
    for name, svc in services.items():
        pod_labels = deployments[backends[name]]["spec"]["template"]["metadata"]["labels"]
        assert svc["spec"]["selector"].items() <= pod_labels.items()

    # Configuration: the central core plugin and the spec's ranges and drivers.
    config = await op.must_get("Secret", f"{CNET}-neutron-config")
    conf, ml2 = ini(secret_file(config, "neutron.conf")), ini(secret_file(config, "ml2_conf.ini"))
    assert conf["DEFAULT"]["core_plugin"] == "isthmus_central"
    assert conf["DEFAULT"]["service_plugins"] == "isthmus_central_l3"
    assert conf["isthmus"]["region_name"] == "CentralRegion"
    assert conf["keystone_authtoken"]["region_name"] == "CentralRegion"
    assert conf["keystone_authtoken"]["auth_url"] == "http://cloud-identity-internal.ns1.svc:5000/v3"
    assert ml2["ml2"]["mechanism_drivers"] == "isthmus_central"
    assert ml2["ml2"]["type_drivers"] == "vlan,vxlan"
    assert ml2["ml2"]["tenant_network_types"] == "vxlan,vlan"
    assert ml2["ml2_type_vlan"]["network_vlan_ranges"] == "physnet1:200:300,physnet2:10:20"
    assert ml2["ml2_type_vxlan"]["vni_ranges"] == "1:5000"
    assert ml2["ml2_type_flat"]["flat_networks"] == "extnet"
    admin = ini(secret_file(await op.must_get("Secret", f"{CNET}-admin-api-config"), "admin-api.conf"))
    assert admin["DEFAULT"]["bind_port"] == "19990"

    # The Admin API is catalogued (service type multiregion) in the central region, and so is
    # central Neutron (network); each registration's Job ran with those arguments.
    admin_url = f"http://{CNET}-admin-api.{NS}.svc:19990"
    regs = await registrations(op, CNET)
    assert set(regs) == {"multiregion", "network"}
    multiregion = regs["multiregion"]
    assert {k: multiregion["spec"][k] for k in ("serviceType", "serviceName", "region", "endpoints")} == {
        "serviceType": "multiregion", "serviceName": "isthmus", "region": "CentralRegion",
        "endpoints": {"public": admin_url, "internal": admin_url}}
    assert multiregion["status"]["registered"] == {"public": admin_url, "internal": admin_url}
    command = container(await op.must_get("Job", multiregion["status"]["jobName"]))["command"]
    for flag, value in (("--service-type", "multiregion"), ("--region", "CentralRegion"), ("--public", admin_url)):
        assert command[command.index(flag) + 1] == value
    assert "--delete" not in command
    assert (regs["network"]["spec"]["region"], regs["network"]["spec"]["endpoints"]["public"]) == (
        "CentralRegion", f"http://{CNET}-neutron-public.{NS}.svc:9696")

    cnet = await op.must_get("CentralNetwork", CNET)
    assert (cnet["status"]["endpoint"], cnet["status"]["adminAPIEndpoint"]) == (
        f"http://{CNET}-neutron-public.{NS}.svc:9696", admin_url)
    states = {c["type"]: c["status"] for c in cnet["status"]["conditions"]}
    assert {t: states.get(t) for t in ("DeploymentReady", "AdminAPIReady", "XJobReady", "EndpointsRegistered")} == {
        "DeploymentReady": "True", "AdminAPIReady": "True", "XJobReady": "True", "EndpointsRegistered": "True"}


async def test_13_regions_registered_with_central(op: Operator) -> None:
    await make(op, regions=[{"name": "RegionOne", "availabilityZone": "zone-a"}, {"name": "RegionTwo"}], **LEAN)
    await op.converge("Region", ONE)
    await op.converge("Region", TWO)
    assert await registered_regions(op) == [{"region": "RegionOne", "availabilityZone": "zone-a"},
                                            {"region": "RegionTwo", "availabilityZone": "az2"}]
    for region, rname in ((ONE, "RegionOne"), (TWO, "RegionTwo")):
        c = await op.must_condition("Region", region, "CentralRegistrationReady")
        assert (c["status"], c["message"]) == ("True", f"registered with {CNET}")
        assert (await op.must_get("Region", region))["status"]["registeredWithCentral"] == {
            "registered": True, "podId": rname}
    # The registry learnt them through the pods Job (central's own pod first).
    assert list((await pods_jobs(op)).values()) == [["CentralRegion:", "RegionOne:zone-a", "RegionTwo:az2"]]

    # Removing RegionTwo from the cloud deletes its Region: its deregistration Jobs run
    # (completed here), then a Job removes its pod from the registry, which waits while the
    # region still holds users' objects, the Region saying so; central drops it from the
    # list at once, before the registry Job for the new list has run.
    await op.patch("MultiRegionCloud", "cloud", {"spec": {"regions": [
        {"name": "RegionOne", "availabilityZone": "zone-a"}]}})

    async def removal_job():
        await complete(op, [job for _, job in await deregister_jobs(op)])
        return next(iter(await op.list("Job", **{"app.kubernetes.io/name": "isthmus-remove-pod"})), None)
    removal = await op.until(removal_job, "the Job that removes RegionTwo's pod")
    run = container(removal)
    assert run["command"][-1] == "RegionTwo" and "remove-pod" in run["command"][2]
    assert run["env"] == [{"name": "ISTHMUS_DB_URL", "valueFrom": {"secretKeyRef": {
        "name": f"{CNET}-isthmus-db", "key": "url"}}}]
    held = "region RegionTwo still holds 1 port (p1): delete them (or move them) first; its pod stays registered"
    await op.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{removal['metadata']['name']}-x1", "labels": {"job-name": removal["metadata"]["name"]}},
        "status": {"containerStatuses": [{"name": "isthmus-remove-pod", "lastState": {"terminated": {
            "exitCode": 3, "finishedAt": "2026-12-04T10:00:00Z", "message": held + "\n"}}}]}})
    c = await op.wait_condition("Region", TWO, "RegistryReleased", "False")
    assert (c["reason"], c["message"]) == ("RegionHeld", held)
    assert (await op.must_get("Region", TWO))["metadata"]["deletionTimestamp"]

    async def dropped():
        await complete(op, [removal])
        return await op.get("Region", TWO) is None and await registered_regions(op) == [
            {"region": "RegionOne", "availabilityZone": "zone-a"}]
    await op.until(dropped, "RegionTwo deleted and dropped from registeredRegions")
    assert [key for key, _ in await deregister_jobs(op)] == [("identity", "RegionTwo"), ("network", "RegionTwo")]
    (pods,) = await op.list("Job", **{"isthmus.dev/pods-job": "true"})
    assert not (pods.get("status") or {}).get("succeeded")
    assert list((await pods_jobs(op)).values()) == [["CentralRegion:", "RegionOne:zone-a"]]
    await op.converge("Region", ONE)  # runs that Job too
    await op.settle()
    assert await registered_regions(op) == [{"region": "RegionOne", "availabilityZone": "zone-a"}]
    assert (await op.must_condition("Region", ONE, "CentralRegistrationReady"))["status"] == "True"


async def test_14_range_mismatch_not_registered(op: Operator) -> None:
    # Central keeps its defaults (VNIs 1:99999, physnet1:100:2999); the region's VNIs overlap
    # central's and its VLAN range on physnet1 does not hold central's.
    bad = {"vniRanges": ["90000:120000"], "networkVlanRanges": ["physnet1:100:200"]}
    await make(op, **LEAN, regions=[{"name": "RegionOne", "neutron": bad}])
    c = await op.wait_condition("Region", ONE, "CrossRegionConfigValid", "False")
    assert c["reason"] == "RangeMismatch"
    assert c["message"] == ("VNI range 90000:120000 overlaps central's 1:99999; "
                            "central VLAN range physnet1:100:2999 is not within the region's")

    # Its Neutron runs, and central has looked at it since: it is not registered.
    async def neutron_ready():
        await op.simulate_ready()
        return (await op.condition("Region", ONE, "NeutronReady") or {}).get("status") == "True"
    await op.until(neutron_ready, "the Region's Neutron ready")
    await op.settle()
    assert await registered_regions(op) == []
    assert await pods_jobs(op) == {}
    region = await op.must_get("Region", ONE)
    assert region["status"]["registeredWithCentral"] == {"registered": False, "podId": ""}
    conditions = {c["type"]: c for c in region["status"]["conditions"]}
    assert (conditions["CentralRegistrationReady"]["status"], conditions["CentralRegistrationReady"]["reason"]) == (
        "False", "Waiting")
    # Ready shows the error (a range mismatch needs a person), not the waiting registration.
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("False", "RangeMismatch")

    # The ranges were the reason: once they agree with central's, the region is registered.
    await op.patch("MultiRegionCloud", "cloud", {"spec": {"regions": [{"name": "RegionOne", "neutron": {
        "vniRanges": ["100000:120000"], "networkVlanRanges": ["physnet1:100:2999"]}}]}})
    await op.converge("Region", ONE)
    assert (await op.must_condition("Region", ONE, "CrossRegionConfigValid"))["status"] == "True"
    assert await registered_regions(op) == [{"region": "RegionOne", "availabilityZone": "az1"}]


async def test_22_delete_cloud_deregisters_first(op: Operator) -> None:
    await make(op, regions=[{"name": "RegionOne"}], **LEAN)
    await op.converge("Region", ONE)  # registered with central, its endpoints registered
    await op.converge("CentralNetwork", CNET)
    registered = {(r["spec"]["serviceType"], r["spec"]["region"]): r for r in await op.list("EndpointRegistration")}
    assert set(registered) == {("identity", "RegionOne"), ("network", "RegionOne"),
                               ("network", "CentralRegion"), ("multiregion", "CentralRegion")}
    assert all(r["status"].get("registered") for r in registered.values())
    assert await registered_regions(op) == [{"region": "RegionOne", "availabilityZone": "az1"}]

    async def jobs_for(keys: list[tuple[str, str]]) -> list[dict[str, Any]] | None:
        found = await deregister_jobs(op)
        return [job for _, job in found] if [key for key, _ in found] == keys else None

    await op.delete("MultiRegionCloud", "cloud")
    # Regions first: each registration of the Region runs a deregistration Job (left
    # incomplete for now) while Keystone and central stay; the cloud keeps its finalizer.
    region_keys = [("identity", "RegionOne"), ("network", "RegionOne")]
    region_jobs = await op.until(lambda: jobs_for(region_keys), "the Region's deregistration Jobs")
    await op.settle()
    assert [key for key, _ in await deregister_jobs(op)] == region_keys
    for job, key in zip(region_jobs, region_keys, strict=True):
        command = container(job)["command"]
        assert command[command.index("--public") + 1] == registered[key]["spec"]["endpoints"]["public"]
        assert command[command.index("--internal") + 1] == registered[key]["spec"]["endpoints"]["internal"]
    mrc = await op.must_get("MultiRegionCloud", "cloud")
    assert mrc["metadata"]["deletionTimestamp"] and mrc["metadata"]["finalizers"] == ["isthmus.dev/cleanup"]
    assert (await op.must_get("Region", ONE))["metadata"].get("deletionTimestamp")
    assert await op.get("CentralNetwork", CNET) is not None
    assert await op.get("IdentityService", "cloud-identity") is not None

    # Those done, the Region goes; then central and its registrations, which deregister
    # while Keystone still serves them.
    await complete(op, region_jobs)
    all_keys = sorted(registered)
    central_jobs = await op.until(lambda: jobs_for(all_keys), "central's deregistration Jobs")
    await op.settle()
    assert await op.get("Region", ONE) is None
    assert await op.get("CentralNetwork", CNET) is None
    assert await op.get("IdentityService", "cloud-identity") is not None
    assert await op.get("MultiRegionCloud", "cloud") is not None

    # Keystone last; the finalizer goes when everything has.
    await complete(op, central_jobs)
    await op.until(lambda: _gone(op, "MultiRegionCloud", "cloud"), "the MultiRegionCloud gone")
    for kind in ("IdentityService", "Region", "CentralNetwork", "EndpointRegistration"):
        assert await op.list(kind) == [], kind
    # Every registered service was deregistered, exactly once.
    assert [key for key, _ in await deregister_jobs(op)] == all_keys


async def test_22_each_registration_deregisters_once(kmock: Any) -> None:
    """The cleanup alone (no operator running): a registration re-created under the same name
    and deleted again runs a deregistration of its own, not the first one's finished Job."""
    register_resources(kmock)
    kube = ServerLikeKube(str(kmock.url))
    try:
        await kube.create({"apiVersion": API_VERSION, "kind": "IdentityService",
                           "metadata": {"name": "cloud-identity", "namespace": NS}, "spec": {"secret": "passwords"}})
        urls = {"public": "http://n/v2.1", "internal": "http://n-int/v2.1"}
        first: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "EndpointRegistration", "metadata": {
            "name": "cloud-region-regionone-compute", "namespace": NS, "uid": "11111111-aaaa"}, "spec": {
            "secret": "passwords", "keystoneRef": "cloud-identity", "serviceType": "compute", "serviceName": "nova",
            "region": "RegionOne", "endpoints": urls}, "status": {"registered": urls}}
        assert not await controllers.delete_registration(kube, first)  # its Job runs
        (job,) = await kube.list("Job", NS)
        assert "--delete" in container(job)["command"]
        await kube.patch("Job", NS, job["metadata"]["name"], {"status": {"succeeded": 1}}, "status")
        assert await controllers.delete_registration(kube, first)
        again = {**first, "metadata": {**first["metadata"], "uid": "22222222-bbbb"}}
        assert not await controllers.delete_registration(kube, again)
        assert sorted(j["metadata"]["name"] for j in await kube.list("Job", NS)) == [
            "cloud-region-regionone-compute-deregister-11111111", "cloud-region-regionone-compute-deregister-22222222"]
    finally:
        await kube.close()
