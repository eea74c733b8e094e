"""Fixtures shared by the gateway's unit tests (a module may define its own ``env``)."""

from __future__ import annotations

import pytest_asyncio

from tests.unit.gateway.fakes import FakeNova, start, stop


@pytest_asyncio.fixture
async def env(tmp_path):
    """The gateway over two fake Novas (RegionOne at 2.90, RegionTwo at 2.95):
    (client, gateway, RegionOne, RegionTwo, servers)."""
    one, two = FakeNova("RegionOne", "az1", "2.90"), FakeNova("RegionTwo", "az2", "2.95")
    client, gateway, servers = await start(tmp_path, [one, two])
    yield client, gateway, one, two, servers
    await stop(client, servers)
