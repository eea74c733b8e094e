"""Two isthmus-operator processes (the console script, as the Deployment's two replicas
run it) against the kmock emulator: one Lease, one acting replica, and the standby
takes over when the leader's pod is deleted (SIGTERM: it releases the Lease)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from isthmus.operator.leader import Leadership
from tests.unit.operator.conftest import PASSWORDS, make_cloud
from tests.unit.operator.kmock_harness import NS, ServerLikeKube, poll, register_resources, secret

pytestmark = [pytest.mark.asyncio, pytest.mark.component]  # real processes against kmock (tests/tiers.py)

BIN = Path(sys.executable).parent
LEASE = ("coordination.k8s.io", "v1", "leases")


def holder(kmock: Any) -> str | None:
    key = (kmock.resource(*LEASE), NS, "isthmus-operator")
    if key not in kmock.objects:
        return None
    return kmock.objects[key].raw["spec"].get("holderIdentity")


async def until(check: Any, what: str, timeout: float = 30.0) -> Any:
    return await poll(check, what, timeout, every=0.2)


def start(kmock: Any, name: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "ISTHMUS_OPERATOR_SERVER": str(kmock.url).rstrip("/"), "POD_NAME": name,
           "ISTHMUS_OPERATOR_LEASE": f"{NS}/isthmus-operator", "ISTHMUS_OPERATOR_TARGET_NAMESPACES": "kube-system"}
    with open(log, "wb") as out:
        return subprocess.Popen([str(BIN / "isthmus-operator"), "--verbose"], stdout=out, stderr=subprocess.STDOUT,
                                env=env)


async def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)  # what kubelet sends when the pod is deleted
    for _ in range(100):
        if proc.poll() is not None:
            return proc.returncode
        await asyncio.sleep(0.2)
    proc.kill()
    return proc.wait()


async def test_the_standby_takes_over_when_the_leaders_pod_is_deleted(kmock: Any, tmp_path: Path) -> None:
    register_resources(kmock)
    client = ServerLikeKube(str(kmock.url))
    logs = {name: tmp_path / f"{name}.log" for name in ("op-a", "op-b")}
    a = start(kmock, "op-a", logs["op-a"])
    b: subprocess.Popen | None = None
    try:
        await until(lambda: holder(kmock) == "op-a", "op-a holding the Lease")
        b = start(kmock, "op-b", logs["op-b"])
        await until(lambda: "waiting for the Lease" in logs["op-b"].read_text(), "op-b waiting")
        await client.create(secret("passwords", dict(PASSWORDS)))
        first = make_cloud("first", NS, centralNetwork={"enabled": False}, apiGateway={"enabled": False},
                           cloudControllerManager={"enabled": False})
        first["metadata"].pop("uid")
        await client.create(first)
        await until(lambda: client.get("IdentityService", NS, "first-identity"), "the leader reconciling")
        assert holder(kmock) == "op-a" and "reconciling" not in logs["op-b"].read_text()

        assert await stop(a) == 0, logs["op-a"].read_text()  # the leader's pod deleted
        await until(lambda: holder(kmock) == "op-b", "op-b taking the Lease", timeout=20)
        second = make_cloud("second", NS, centralNetwork={"enabled": False}, apiGateway={"enabled": False},
                            cloudControllerManager={"enabled": False})
        second["metadata"].pop("uid")
        await client.create(second)
        await until(lambda: client.get("IdentityService", NS, "second-identity"), "the new leader reconciling")
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                await stop(proc)
        await client.close()
    assert b is not None and b.returncode == 0, logs["op-b"].read_text()
    assert not holder(kmock)  # released again: nobody holds it


async def test_a_leader_that_cannot_renew_gives_up() -> None:
    class Elector:
        namespace, name, identity = NS, "isthmus-operator", "me"
        results = [True, True, False]

        def try_acquire_or_renew(self) -> bool:
            return self.results.pop(0) if self.results else False

        def release(self) -> None:
            pass

    lost = asyncio.Event()
    leadership = Leadership(Elector(), on_lost=lost.set, retry=0.01)  # type: ignore[arg-type]
    await leadership.acquire()
    await asyncio.wait_for(lost.wait(), timeout=5)
    await leadership.release()
