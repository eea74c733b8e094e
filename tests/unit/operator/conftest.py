"""Shared fixtures of the operator tests: a MultiRegionCloud and its passwords."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

PASSWORDS = {"admin-password": "adm1n", "service-password": "s3rvice", "database-password": "db-pw",
             "transport-url": "rabbit://u:p@rabbit:5672/"}


def make_cloud(name: str = "cloud", namespace: str = "ns1", **spec_overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "secret": "passwords",
        "database": {"host": "db.example"},
        "identity": {"memcachedServers": ["mc:11211"]},
        "regions": [{"name": "RegionOne"}, {"name": "RegionTwo"}],
        "cloudControllerManager": {"enabled": True, "credentialsSecretRef": {"name": "appcred"}},
    }
    spec.update(copy.deepcopy(spec_overrides))
    return {"apiVersion": "isthmus.dev/v1alpha1", "kind": "MultiRegionCloud",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"}, "spec": spec}


def passwords_secret(namespace: str = "ns1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "passwords", "namespace": namespace},
            "stringData": dict(PASSWORDS)}


@pytest.fixture
def cloud() -> dict[str, Any]:
    return make_cloud()


@pytest_asyncio.fixture
async def op(kmock: Any) -> AsyncIterator[Any]:
    """The real operator running in-process against the kmock emulator (kmock_harness)."""
    from tests.unit.operator.kmock_harness import Operator, register_resources

    register_resources(kmock)
    operator = Operator(kmock)
    await operator.start()
    try:
        yield operator
    finally:
        await operator.close()
