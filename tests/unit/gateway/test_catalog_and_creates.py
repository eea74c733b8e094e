"""Endpoint discovery by region and type and creates that cannot be recorded."""

import asyncio

import pytest
import pytest_asyncio

from isthmus.gateway.catalog import Catalog, endpoints_from_catalog, version_entry, version_range
from isthmus.gateway.microversion import Range
from tests.unit.gateway.fakes import FakeNova, start, stop

USER = {"X-Auth-Token": "user"}


def ep(region, url, interface="public"):
    return {"region_id": region, "interface": interface, "url": url}


async def url_of(catalog: Catalog, service: str, region: str) -> str:
    """The endpoint's URL, which the test expects the catalog to have."""
    endpoint = await catalog.endpoint(service, region)
    assert endpoint is not None
    return endpoint.url


def test_endpoints_by_type_alias_region_and_interface():
    catalog = {
        "volumev3": [ep("R1", "http://a/v3/$(project_id)s"), ep("Central", "http://gw/volume/v3")],
        "block-storage": [ep("R2", "http://b/volume/v3/svcproject"), ep("R2", "http://internal/v3", "internal")],
    }
    found = endpoints_from_catalog(catalog, "volume", "public", "svcproject", {"Central"})
    assert {r: e.url for r, e in found.items()} == {"R1": "http://a/v3", "R2": "http://b/volume/v3"}
    assert found["R2"].root == "http://b/volume"


@pytest.mark.asyncio
async def test_catalog_reloads_after_invalidate_without_restart():
    urls = iter(["http://old/v2.1", "http://new/v2.1"])
    loads = []

    def load(refresh):
        loads.append(refresh)
        return {"compute": [ep("R1", next(urls))]}, None

    catalog = Catalog(load, "public", set(), ttl=300)
    assert (await url_of(catalog, "compute", "R1")) == "http://old/v2.1"
    assert (await url_of(catalog, "compute", "R1")) == "http://old/v2.1"  # cached
    catalog.invalidate()  # just loaded: a burst of errors does not reload at once
    assert (await url_of(catalog, "compute", "R1")) == "http://old/v2.1"
    catalog.invalidate(min_age=0)  # what a connection error does once the catalog is older
    assert (await url_of(catalog, "compute", "R1")) == "http://new/v2.1"
    assert loads == [True, True]  # every load asks Keystone for a fresh catalog (not the cached token's)


@pytest.mark.asyncio
async def test_catalog_loads_on_first_use_right_after_boot(monkeypatch):
    # time.monotonic() counts from boot: on a machine up for a minute it is below the TTL.
    monkeypatch.setattr("isthmus.gateway.catalog.time.monotonic", lambda: 60.0)
    catalog = Catalog(lambda refresh: ({"compute": [ep("R1", "http://a/v2.1")]}, None), "public", set(), ttl=300)
    assert (await url_of(catalog, "compute", "R1")) == "http://a/v2.1"


def test_version_range_from_documents():
    nova = {"versions": [{"id": "v2.0", "version": ""}, {"id": "v2.1", "version": "2.96", "min_version": "2.1"}]}
    cinder = {"versions": [{"id": "v3.0", "version": "3.71", "min_version": "3.0"}]}
    assert version_range(nova, "compute") == Range((2, 1), (2, 96))
    assert version_range(cinder, "volume") == Range((3, 0), (3, 71))


@pytest_asyncio.fixture
async def env(tmp_path):
    one = FakeNova("RegionOne", "az1")
    client, gateway, servers = await start(tmp_path, [one])
    yield client, gateway, one
    await stop(client, servers)


@pytest.mark.component  # fake regions over HTTP (tests/tiers.py)
@pytest.mark.asyncio
async def test_create_that_cannot_be_routed_is_undone(env):
    client, gateway, one = env

    async def broken(*_args, **_kw):
        raise RuntimeError("database is gone")

    gateway.router.record = broken
    resp = await client.post("/compute/v2.1/servers", headers=USER, json={"server": {"name": "x"}})
    assert resp.status == 500 and "undone" in (await resp.json())["computeFault"]["message"]
    assert one.servers == {}  # compensating delete reached the region
    assert [r[0] for r in one.requests if "/servers" in r[1]][-2:] == ["POST", "DELETE"]


@pytest.mark.component  # fake regions over HTTP (tests/tiers.py)
@pytest.mark.asyncio
async def test_identical_creates_under_one_request_id_share_one_upstream_create(env):
    client, gateway, one = env
    headers = {**USER, "X-OpenStack-Request-ID": "req-12345678-1234-1234-1234-123456789012"}
    body = {"server": {"name": "same"}}
    replies = await asyncio.gather(*(client.post("/compute/v2.1/servers", headers=headers, json=body)
                                     for _ in range(3)))
    ids = {(await r.json())["server"]["id"] for r in replies}
    assert len(ids) == 1 and len(one.servers) == 1
    other = await client.post("/compute/v2.1/servers", headers=USER, json=body)  # no request id: a new create
    assert (await other.json())["server"]["id"] not in ids


def test_version_entry_is_the_served_version_as_the_region_shows_it():
    cinder = {"versions": [{"id": "v3.0", "version": "3.71", "min_version": "3.0", "updated": "2023-08-31T00:00:00Z"}]}
    entry = version_entry(cinder, "volume")
    assert entry is not None and entry["updated"] == "2023-08-31T00:00:00Z"
    assert version_entry({"versions": [{"id": "v2.0", "version": ""}]}, "compute") is None
