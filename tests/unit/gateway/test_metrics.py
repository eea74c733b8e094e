"""``/metrics`` of the gateway after known requests: inbound counts and latency per API,
calls per region, and the breaker of a region that stopped answering."""

from __future__ import annotations

import re

import pytest
from prometheus_client import REGISTRY

from isthmus.breaker import Breaker

pytestmark = pytest.mark.component  # fake regions served over HTTP (tests/tiers.py)

USER = {"X-Auth-Token": "user"}


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def scrape(client) -> str:
    resp = await client.get("/metrics")
    assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
    return await resp.text()


@pytest.mark.asyncio
async def test_requests_and_region_calls_counted(env):
    client, _, one, two, _ = env
    one.add("a")
    before = value("isthmus_gateway_requests_total", api="compute", method="GET", status="200")
    before_401 = value("isthmus_gateway_requests_total", api="compute", method="GET", status="401")
    before_one = value("isthmus_gateway_upstream_requests_total", region="RegionOne", api="compute", result="200")
    before_two = value("isthmus_gateway_upstream_request_seconds_count", region="RegionTwo", api="compute")
    for _ in range(3):
        assert (await client.get("/compute/v2.1/servers", headers=USER)).status == 200
    assert (await client.get("/compute/v2.1/servers")).status == 401
    text = await scrape(client)
    assert value("isthmus_gateway_requests_total", api="compute", method="GET", status="200") == before + 3
    assert value("isthmus_gateway_requests_total", api="compute", method="GET", status="401") == before_401 + 1
    # A list asks every region: at least one call each per request.
    assert value("isthmus_gateway_upstream_requests_total", region="RegionOne", api="compute",
                 result="200") >= before_one + 3
    assert value("isthmus_gateway_upstream_request_seconds_count", region="RegionTwo",
                 api="compute") >= before_two + 3
    assert "isthmus_gateway_request_seconds_bucket" in text
    assert re.search(r'isthmus_gateway_breaker_state\{endpoint="127\.0\.0\.1:\d+",region="RegionOne"\} 0\.0', text)


@pytest.mark.asyncio
async def test_a_dead_region_opens_its_breaker(env):
    client, gateway, one, two, servers = env
    await servers[1].close()  # RegionTwo stops answering
    before = value("isthmus_gateway_upstream_requests_total", region="RegionTwo", api="compute",
                   result="unavailable")
    await client.get("/compute/v2.1/servers", headers=USER)
    text = await scrape(client)
    assert value("isthmus_gateway_upstream_requests_total", region="RegionTwo", api="compute",
                 result="unavailable") >= before + 1
    assert re.search(r'isthmus_gateway_breaker_state\{endpoint="[^"]+",region="RegionTwo"\} 2\.0', text)


def test_breaker_states() -> None:
    now = [0.0]
    breaker = Breaker(cooldown=10, clock=lambda: now[0])
    assert breaker.state() == "closed"
    breaker.failed()
    assert breaker.state() == "open"
    now[0] = 11
    assert breaker.state() == "half_open"
    breaker.succeeded()
    assert breaker.state() == "closed"
