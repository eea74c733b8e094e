"""The real operator against kmock: an upgrade (a new ``spec.version``) runs each child's
schema Jobs for that version before its Deployments take the new image, one child at a
time (Keystone, central, each region, the gateway), and a failed migration stops it there
(docs/operator.md, "Upgrades")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.unit.operator.kmock_harness import Operator, make

pytestmark = [pytest.mark.asyncio, pytest.mark.component]  # the real operator against kmock (tests/tiers.py)

IDS, CNET = "cloud-identity", "cloud-central-network"
ONE, TWO = "cloud-region-regionone", "cloud-region-regiontwo"
OLD, NEW = "quay.io/isthmus/isthmus:0.1.0", "quay.io/isthmus/isthmus:0.2.0"


async def simulate(op: Operator, prefix: str) -> None:
    """Readiness for the Deployments and Jobs of one child only (names start with ``prefix``)."""
    for dep in await op.list("Deployment"):
        meta = dep["metadata"]
        replicas = dep["spec"].get("replicas", 1)
        want = {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
                "updatedReplicas": replicas, "observedGeneration": meta.get("generation", 1)}
        if meta["name"].startswith(prefix) and any((dep.get("status") or {}).get(k) != v for k, v in want.items()):
            await op.patch("Deployment", meta["name"], {"status": want}, subresource="status")
    for job in await op.list("Job"):
        if job["metadata"]["name"].startswith(prefix) and not (job.get("status") or {}).get("conditions"):
            await op.patch("Job", job["metadata"]["name"], {"status": {"succeeded": 1, "conditions": [
                {"type": "Complete", "status": "True"}]}}, subresource="status")


async def images(op: Operator, prefix: str) -> set[str]:
    return {c["image"] for d in await op.list("Deployment") if d["metadata"]["name"].startswith(prefix)
            for c in d["spec"]["template"]["spec"]["containers"]}


async def schema_jobs(op: Operator) -> set[str]:
    return {j["metadata"]["name"] for j in await op.list("Job") if "-db-sync-" in j["metadata"]["name"]}


async def updated(op: Operator) -> dict[str, Any] | None:
    return await op.condition("MultiRegionCloud", "cloud", "Updated")


async def rolled(op: Operator, prefix: str, version: str) -> None:
    """Simulate ``prefix``'s readiness until its status says it runs ``version``."""
    async def check():
        await simulate(op, prefix)
        obj = await op.get({IDS: "IdentityService", CNET: "CentralNetwork"}.get(prefix, "Region"), prefix)
        return ((obj or {}).get("status") or {}).get("deployedVersion") == version
    try:
        await op.until(check, f"{prefix} at {version}", timeout=60)
    except AssertionError as exc:
        obj = await op.get({IDS: "IdentityService", CNET: "CentralNetwork"}.get(prefix, "Region"), prefix)
        raise AssertionError(f"{exc}: {((obj or {}).get('status') or {}).get('conditions')}") from exc


async def test_an_upgrade_migrates_then_rolls_one_child_at_a_time_and_stops_at_a_failure(op: Operator) -> None:
    await make(op, regions=[{"name": "RegionOne"}, {"name": "RegionTwo"}], apiGateway={"enabled": False},
               cloudControllerManager={"enabled": False})
    await op.converge("MultiRegionCloud", "cloud", timeout=90)
    done = await op.until(lambda: _deployed(op, "0.1.0"), "the cloud at 0.1.0")
    assert done and (await updated(op) or {}).get("status") == "True"
    before = await schema_jobs(op)
    assert {f"{IDS}-db-sync-0-1-0", f"{CNET}-isthmus-db-sync-0-1-0", f"{ONE}-neutron-db-sync-0-1-0"} <= before

    await op.patch("MultiRegionCloud", "cloud", {"spec": {"version": "0.2.0"}})
    # 1. Keystone: its schema Job for 0.2.0 first; its Deployment keeps the old image meanwhile
    await op.until(lambda: _has_job(op, f"{IDS}-db-sync-0-2-0"), "keystone's 0.2.0 schema Job")
    await asyncio.wait_for(op.settle(), 20)
    step = await updated(op)
    assert step is not None and (step["status"], step["reason"]) == ("False", "UpdateInProgress")
    assert step["message"] == "IdentityService cloud-identity: rolling out 0.2.0 (1 of 4)"
    assert await images(op, IDS) == {OLD}
    assert await schema_jobs(op) - before == {f"{IDS}-db-sync-0-2-0"}  # nobody else migrates yet
    assert await images(op, ONE) == await images(op, TWO) == await images(op, CNET) == {OLD}
    await rolled(op, IDS, "0.2.0")
    assert await images(op, IDS) == {NEW}

    # 2. central: the Isthmus and central Neutron schemas, then its Deployments
    await op.until(lambda: _has_job(op, f"{CNET}-neutron-db-sync-0-2-0"), "central's 0.2.0 schema Jobs")
    assert f"{CNET}-isthmus-db-sync-0-2-0" in await schema_jobs(op)
    assert await images(op, CNET) == {OLD} and await images(op, ONE) == {OLD}
    await rolled(op, CNET, "0.2.0")

    # 3. the regions, one at a time
    await op.until(lambda: _has_job(op, f"{ONE}-neutron-db-sync-0-2-0"), "RegionOne's 0.2.0 schema Job")
    step = await updated(op)
    assert step is not None and step["message"] == "Region cloud-region-regionone: rolling out 0.2.0 (3 of 4)"
    assert f"{TWO}-neutron-db-sync-0-2-0" not in await schema_jobs(op) and await images(op, TWO) == {OLD}
    await rolled(op, ONE, "0.2.0")
    assert await images(op, ONE) == {NEW}

    # 4. RegionTwo's migration fails: the rollout stops there, its Neutron keeps the old image
    failing = f"{TWO}-neutron-db-sync-0-2-0"
    await op.until(lambda: _has_job(op, failing), "RegionTwo's 0.2.0 schema Job")
    await op.patch("Job", failing, {"status": {"failed": 7, "conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}, subresource="status")

    async def stopped():
        c = await updated(op)
        return c if c and c["reason"] == "UpdateFailed" else None
    c = await op.until(stopped, "Updated=False/UpdateFailed")
    assert c["status"] == "False" and f"Job {failing}" in c["message"] and c["message"].startswith(
        "Region cloud-region-regiontwo: ")
    ready = await op.must_condition("MultiRegionCloud", "cloud", "Ready")
    assert ready["status"] == "False" and failing in ready["message"]  # an error: Ready shows it
    await asyncio.wait_for(op.settle(), 20)
    assert await images(op, TWO) == {OLD}  # never on a schema older than its code
    mrc = await op.must_get("MultiRegionCloud", "cloud")
    assert mrc["status"]["deployedVersion"] == "0.1.0"
    assert {r["name"]: r["version"] for r in mrc["status"]["regions"]} == {"RegionOne": "0.2.0",
                                                                            "RegionTwo": "0.1.0"}


async def _deployed(op: Operator, version: str) -> bool:
    mrc = await op.get("MultiRegionCloud", "cloud")
    return ((mrc or {}).get("status") or {}).get("deployedVersion") == version


async def _has_job(op: Operator, name: str) -> bool:
    return await op.get("Job", name) is not None
