"""Talking to regions: one pooled aiohttp client, header hygiene, timeouts."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy

from isthmus.breaker import Breaker
from isthmus.gateway import metrics

LOG = logging.getLogger(__name__)

# RFC 9110 §7.6.1 hop-by-hop headers, plus Host (recomputed from the region URL)
# and the lengths/encodings that change when a body is rewritten.
HOP_BY_HOP = frozenset(h.lower() for h in (
    "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "TE",
    "Trailer", "Trailers", "Transfer-Encoding", "Upgrade",
))
NEVER_FORWARD = HOP_BY_HOP | {"host", "content-length", "accept-encoding", "expect"}
# Identity headers are set by keystonemiddleware from a validated token; a client
# must not be able to pre-set them for the region.
_IDENTITY_PREFIXES = ("x-identity-", "x-service-", "x-user", "x-project-", "x-domain-", "x-tenant",
                      "x-role", "x-is-admin")
RESPONSE_DROP = HOP_BY_HOP | {"content-length", "content-encoding", "server", "date",
                              "x-openstack-request-id", "x-compute-request-id", "openstack-api-version", "vary"}


class RegionUnavailable(Exception):
    def __init__(self, region: str, reason: str) -> None:
        super().__init__(f"region {region} unavailable: {reason}")
        self.region = region
        self.reason = reason


@dataclass
class Reply:
    status: int
    headers: CIMultiDictProxy[str] | CIMultiDict[str]
    body: bytes
    # A large reply is not read whole: ``body`` is empty and this yields it.
    stream: AsyncIterator[bytes] | None = None

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def is_json(self) -> bool:
        return "json" in self.headers.get("Content-Type", "")


def request_headers(inbound: Mapping[str, str]) -> CIMultiDict[str]:
    """What of the client's headers a region may see."""
    listed = {h.strip().lower() for h in inbound.get("Connection", "").split(",") if h.strip()}
    out: CIMultiDict[str] = CIMultiDict()
    for key, value in inbound.items():
        low = key.lower()
        if low in NEVER_FORWARD or low in listed or low.startswith(_IDENTITY_PREFIXES):
            continue
        if low in ("openstack-api-version", "x-openstack-nova-api-version"):
            continue  # the negotiated version is set explicitly
        out.add(key, value)
    return out


def response_headers(reply_headers: Mapping[str, str]) -> CIMultiDict[str]:
    listed = {h.strip().lower() for h in reply_headers.get("Connection", "").split(",") if h.strip()}
    out: CIMultiDict[str] = CIMultiDict()
    for key, value in reply_headers.items():
        low = key.lower()
        if low in RESPONSE_DROP or low in listed:
            continue
        out.add(key, value)
    return out


class Upstream:
    """A pooled HTTP client shared by every request of the process.

    A sick region costs the others nothing: each region may hold at most
    ``per_region_limit`` requests in flight (a hung one cannot take the whole
    pool; one more waits ``queue_wait`` at most, then fails), and a region that
    timed out or refused is not asked again for ``breaker_cooldown`` seconds
    (calls fail at once instead of each waiting a timeout; after the cooldown one
    call is the trial, and only its success lets the others through)."""

    def __init__(self, connection_limit: int = 200, per_region_limit: int = 50,
                 breaker_cooldown: float = 10.0, queue_wait: float = 1.0, breaker_threshold: int = 1) -> None:
        self._limit = connection_limit
        self._per_region = per_region_limit
        self._cooldown = breaker_cooldown
        self._threshold = breaker_threshold
        self._queue_wait = queue_wait
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._breakers: dict[str, Breaker] = {}
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(limit=self._limit, limit_per_host=self._limit, keepalive_timeout=30,
                                         ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True,
                                              skip_auto_headers=("User-Agent",))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def breakers(self) -> dict[str, Breaker]:
        """Every breaker made so far, by "<region> <host:port>" (for metrics)."""
        return dict(self._breakers)

    def breaker(self, region: str, url: str) -> Breaker:
        """One breaker per service of a region (its host:port): a hung nova-api must
        not fail the same region's Cinder calls fast."""
        key = f"{region} {urlsplit(url).netloc}"
        if key not in self._breakers:
            self._breakers[key] = Breaker(cooldown=self._cooldown, threshold=self._threshold)
        return self._breakers[key]

    async def request(self, region: str, method: str, url: str, headers: Mapping[str, str],
                      body: bytes | None, timeout: float, stream_over: int = 0) -> Reply:
        """One call to ``region``. With ``stream_over``, a successful reply longer than
        that many bytes comes back as ``Reply.stream`` (the region's slot is held
        until the stream is consumed) instead of being read into memory."""
        assert self._session is not None, "Upstream.start() was not called"
        breaker = self.breaker(region, url)
        wait = breaker.admit()
        if wait:
            metrics.observe_upstream(region, "unavailable", None)
            raise RegionUnavailable(region, f"failed moments ago; not asked for another {wait:.0f}s")
        slots = self._slots.setdefault(f"{region} {urlsplit(url).netloc}", asyncio.Semaphore(self._per_region))
        try:
            await asyncio.wait_for(slots.acquire(), self._queue_wait)
        except TimeoutError:
            breaker.abandoned()
            metrics.observe_upstream(region, "unavailable", None)
            raise RegionUnavailable(region, f"{self._per_region} requests already in flight") from None
        except BaseException:
            breaker.abandoned()
            raise
        streaming = False
        started = breaker.now()
        try:
            resp = await self._session.request(method, url, headers=headers, data=body or None,
                                               allow_redirects=False, timeout=aiohttp.ClientTimeout(total=timeout))
            try:
                data = b""
                if stream_over and 200 <= resp.status < 300:
                    data = await _read_up_to(resp, stream_over + 1)
                    if len(data) > stream_over:
                        streaming = True
                        breaker.succeeded()
                        metrics.observe_upstream(region, str(resp.status), breaker.now() - started)
                        return Reply(resp.status, resp.headers, b"", stream=_rest(data, resp, slots))
                data += await resp.read()
            finally:
                if not streaming:
                    resp.release()
        except TimeoutError as err:
            breaker.failed(since=started)
            metrics.observe_upstream(region, "unavailable", None)
            raise RegionUnavailable(region, f"no answer within {timeout:g}s") from err
        except aiohttp.ClientError as err:
            breaker.failed(since=started)
            metrics.observe_upstream(region, "unavailable", None)
            raise RegionUnavailable(region, type(err).__name__) from err
        except BaseException:  # cancelled: no verdict on the region
            breaker.abandoned()
            raise
        finally:
            if not streaming:
                slots.release()
        breaker.succeeded()
        metrics.observe_upstream(region, str(resp.status), breaker.now() - started)
        return Reply(resp.status, resp.headers, data)


async def _read_up_to(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await resp.content.read(limit - size)
        if not chunk:
            break
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)


async def _rest(head: bytes, resp: aiohttp.ClientResponse, slots: asyncio.Semaphore) -> AsyncIterator[bytes]:
    try:
        yield head
        async for chunk in resp.content.iter_chunked(65536):
            yield chunk
    finally:
        resp.release()
        slots.release()
