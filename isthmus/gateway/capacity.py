"""Free compute capacity of each region, read from its Placement service.

For the ``most_free_capacity`` placement policy: a project's first server or
volume binds it to the region with the most room. One Placement call per region
(``GET /allocation_candidates``, whose provider summaries carry each resource
class's capacity and usage), with service credentials and the session's bounded
timeout, cached for ``ttl`` seconds so a burst of new projects asks once.
A region whose Placement does not answer has unknown capacity: it ranks after
every region whose capacity is known, never first because nothing was read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

LOG = logging.getLogger(__name__)

# 1.12: provider_summaries as {"resources": {CLASS: {"capacity", "used"}}}.
PLACEMENT_VERSION = "placement 1.12"


@dataclass(frozen=True, order=True)
class Capacity:
    """Free room of one region, summed over its compute providers (capacity is
    Placement's: (total - reserved) * allocation_ratio)."""

    memory_mb: int
    vcpus: int


def capacity_from_candidates(doc: Mapping[str, Any]) -> Capacity:
    """Free MEMORY_MB and VCPU over the providers of an allocation-candidates reply."""
    free = {"MEMORY_MB": 0, "VCPU": 0}
    summaries = doc.get("provider_summaries")
    if not isinstance(summaries, Mapping):  # absent too: not a reply of Placement's
        raise ValueError("provider_summaries is not an object")
    for summary in summaries.values():
        resources = (summary or {}).get("resources") or {}
        for resource_class in free:
            usage = resources.get(resource_class)
            if isinstance(usage, Mapping):
                free[resource_class] += max(0, int(usage.get("capacity", 0)) - int(usage.get("used", 0)))
    return Capacity(memory_mb=free["MEMORY_MB"], vcpus=free["VCPU"])


def read_capacity(session: Any, region: str, interface: str = "public") -> Capacity:
    """One region's free capacity (keystoneauth session, service credentials);
    raises on any failure (the caller takes that as unknown)."""
    resp = session.get("/allocation_candidates", params={"resources": "MEMORY_MB:1,VCPU:1"},
                       headers={"OpenStack-API-Version": PLACEMENT_VERSION},
                       endpoint_filter={"service_type": "placement", "region_name": region, "interface": interface})
    return capacity_from_candidates(resp.json())


def rank_by_capacity(regions: Iterable[str], capacities: Mapping[str, Capacity | None],
                     tie_break: Callable[[str], Any]) -> list[str]:
    """Regions, most free room first (memory, then VCPUs); unknown capacity last;
    ``tie_break`` orders equals (fewest bound projects, then name)."""
    def key(region: str) -> tuple:
        known = capacities.get(region)
        room = (-known.memory_mb, -known.vcpus) if known is not None else (0, 0)
        return (known is None, room, tie_break(region))
    return sorted(regions, key=key)


class CapacityReader:
    """Cached, concurrent reads of every candidate region's capacity."""

    def __init__(self, read: Callable[[str], Capacity], ttl: float = 30.0, clock=time.monotonic) -> None:
        self._read = read
        self._ttl = ttl
        self._clock = clock
        self._seen: dict[str, tuple[float, Capacity | None]] = {}
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="gateway-placement")

    async def of(self, regions: Iterable[str]) -> dict[str, Capacity | None]:
        now = self._clock()
        wanted = list(regions)
        stale = [r for r in wanted if r not in self._seen or now - self._seen[r][0] > self._ttl]
        if stale:
            loop = asyncio.get_running_loop()
            results = await asyncio.gather(*(loop.run_in_executor(self._pool, self._safe_read, r) for r in stale))
            for region, capacity in zip(stale, results, strict=True):
                self._seen[region] = (now, capacity)
        return {r: self._seen[r][1] for r in wanted}

    def _safe_read(self, region: str) -> Capacity | None:
        try:
            return self._read(region)
        except Exception as err:  # noqa: BLE001 - any failure is "capacity unknown", logged
            LOG.warning("capacity of region %s unknown (Placement): %s", region, err)
            return None

    def close(self) -> None:
        self._pool.shutdown(wait=False)
