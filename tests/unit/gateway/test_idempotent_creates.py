"""Idempotent creates across gateway processes, timeouts and error replies."""

import asyncio
import uuid

import pytest

from tests.unit.gateway.fakes import FakeNova, start, stop

pytestmark = pytest.mark.component  # fake regions served over HTTP (tests/tiers.py)

USER = {"X-Auth-Token": "user"}


def retry_headers() -> dict:
    return {**USER, "X-OpenStack-Request-ID": f"req-{uuid.uuid4()}"}


@pytest.mark.asyncio
async def test_identical_creates_through_two_gateway_processes_make_one_server(tmp_path):
    one = FakeNova("RegionOne", "az1", reply_delay=0.5)
    client_a, gateway_a, servers = await start(tmp_path, [one])
    client_b, gateway_b, _ = await start(tmp_path, [one], serve_regions=False)
    headers = retry_headers()
    body = {"server": {"name": "twice"}}
    try:
        replies = await asyncio.gather(client_a.post("/compute/v2.1/servers", headers=headers, json=body),
                                       client_b.post("/compute/v2.1/servers", headers=headers, json=body))
        assert [r.status for r in replies] == [202, 202]
        ids = {(await r.json())["server"]["id"] for r in replies}
        assert len(ids) == 1 and len(one.servers) == 1
        # Later, another process still replays it (and the routing holds there too).
        again = await client_b.post("/compute/v2.1/servers", headers=headers, json=body)
        assert (await again.json())["server"]["id"] in ids and len(one.servers) == 1
        assert (await client_b.get(f"/compute/v2.1/servers/{ids.pop()}", headers=USER)).status == 200
    finally:
        await stop(client_b, [])
        await stop(client_a, servers)


@pytest.mark.asyncio
async def test_a_retry_after_a_create_that_timed_out_finds_the_server_instead_of_making_another(tmp_path):
    one = FakeNova("RegionOne", "az1", reply_delay=3.0)  # longer than request_timeout (2 s)
    client, gateway, servers = await start(tmp_path, [one])
    headers = retry_headers()
    body = {"server": {"name": "slow-answer"}}
    try:
        first = await client.post("/compute/v2.1/servers", headers=headers, json=body)
        assert first.status == 503 and len(one.servers) == 1  # the region made it; the answer came too late
        created = next(iter(one.servers))
        one.reply_delay = 0.0
        gateway.upstream.breaker("RegionOne", one.base).succeeded()  # the timeout opened it; not what is tested here
        retry = await client.post("/compute/v2.1/servers", headers=headers, json=body)
        assert retry.status == 202 and (await retry.json())["server"]["id"] == created
        assert len(one.servers) == 1
        assert (await client.get(f"/compute/v2.1/servers/{created}", headers=USER)).status == 200
        # A different request id is a different create, even with the same body.
        other = await client.post("/compute/v2.1/servers", headers=retry_headers(), json=body)
        assert other.status == 202 and len(one.servers) == 2
    finally:
        await stop(client, servers)


@pytest.mark.asyncio
async def test_an_error_reply_is_not_replayed_to_a_retry(tmp_path):
    one = FakeNova("RegionOne", "az1", fail_creates=[400])
    client, gateway, servers = await start(tmp_path, [one])
    headers = retry_headers()
    body = {"server": {"name": "second-time-lucky"}}
    try:
        first = await client.post("/compute/v2.1/servers", headers=headers, json=body)
        assert first.status == 400 and not one.servers
        retry = await client.post("/compute/v2.1/servers", headers=headers, json=body)
        assert retry.status == 202 and len(one.servers) == 1
    finally:
        await stop(client, servers)


@pytest.mark.asyncio
async def test_a_replayed_create_never_hands_out_the_admin_password_again(tmp_path):
    from isthmus.gateway.idempotency import scrub

    body = b'{"server": {"id": "x", "adminPass": "secret", "links": []}}'
    assert b"secret" not in scrub(body, "server") and b'"id": "x"' in scrub(body, "server")
    assert scrub(b"not json", "server") == b"not json"


@pytest.mark.asyncio
async def test_recovery_adopts_only_the_object_carrying_its_key(tmp_path):
    """Issue 26 item 2: recovery adopted the oldest same-named server made since the
    attempt, whoever made it. Now only the one tagged with this create's key."""
    one = FakeNova("RegionOne", "az1", reply_delay=3.0)  # longer than request_timeout (2 s)
    client, gateway, servers = await start(tmp_path, [one])
    headers = retry_headers()
    body = {"server": {"name": "popular", "metadata": {"mine": "yes"}}}
    try:
        first = await client.post("/compute/v2.1/servers", headers=headers, json=body)
        assert first.status == 503
        (ours,) = one.servers
        assert one.servers[ours]["metadata"]["mine"] == "yes"
        del one.servers[ours]  # as if the region never made it...
        from datetime import UTC, datetime
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        one.add("popular", created=now)  # ...while someone else made a server of the same name
        one.reply_delay = 0.0
        gateway.upstream.breaker("RegionOne", one.base).succeeded()
        retry = await client.post("/compute/v2.1/servers", headers=headers, json=body)
        assert retry.status == 202 and len(one.servers) == 2  # created anew, nothing adopted
    finally:
        await stop(client, servers)


@pytest.mark.asyncio
async def test_the_same_request_id_from_another_member_is_another_create(tmp_path):
    """Issue 26 item 3: the key was per project, so a colleague replayed the reply."""
    one = FakeNova("RegionOne", "az1")
    client, gateway, servers = await start(tmp_path, [one])
    request_id = f"req-{uuid.uuid4()}"
    body = {"server": {"name": "same"}}
    try:
        mine = await client.post("/compute/v2.1/servers", json=body,
                                 headers={"X-Auth-Token": "user", "X-OpenStack-Request-ID": request_id})
        theirs = await client.post("/compute/v2.1/servers", json=body,
                                   headers={"X-Auth-Token": "colleague", "X-OpenStack-Request-ID": request_id})
        assert (mine.status, theirs.status) == (202, 202)
        assert (await mine.json())["server"]["id"] != (await theirs.json())["server"]["id"]
        assert len(one.servers) == 2
    finally:
        await stop(client, servers)


def test_a_touched_attempt_is_never_taken_over(tmp_path):
    """Issue 26 item 2: a live attempt (a long image copy) went stale and another
    process took it over; the attempt now touches its row while it works."""
    import time

    from isthmus.db import make_engine
    from isthmus.gateway import schema
    from isthmus.gateway.idempotency import ClaimState, CreateLedger

    engine = make_engine(f"sqlite:///{tmp_path}/ledger.sqlite")
    schema.create_schema(engine)
    ledger = CreateLedger(engine, stale_after=1.0)
    first = ledger.claim("k", "p", "RegionOne")
    assert first.state is ClaimState.MINE
    for _ in range(6):  # 1.2 s in all: longer than stale_after, touched well within it
        time.sleep(0.2)
        ledger.touch("k", first.owner)
    assert ledger.claim("k", "p", "RegionOne").state is ClaimState.RUNNING
    time.sleep(1.1)
    assert ledger.claim("k", "p", "RegionOne").state is ClaimState.RECOVER
