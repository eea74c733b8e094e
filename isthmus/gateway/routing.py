"""Which region owns a resource, and where a new one goes.

Backed by the Isthmus region registry (pods, AZs, project bindings, routings);
an in-process LRU in front of it keeps the hot path off the database. Database
calls run in a small thread pool (SQLAlchemy is synchronous).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from isthmus.gateway.capacity import CapacityReader, rank_by_capacity
from isthmus.gateway.faults import Fault
from isthmus.registry import Conflict, NotFound, Pod, Registry, Routing
from isthmus.registry.bindings import Bindings

LOG = logging.getLogger(__name__)
T = TypeVar("T")


class Router:
    def __init__(self, registry: Registry, central_region: str, master_region: str | None = None,
                 pods_ttl: float = 10.0, cache_size: int = 200_000, capacity: CapacityReader | None = None,
                 regions: Collection[str] = ()) -> None:
        self.registry = registry
        self.selected = frozenset(regions)  # [gateway] regions; empty: every regional pod
        # Set: new bindings go to the region with the most free room (policy
        # most_free_capacity); None: to the region with the fewest bound projects.
        self.capacity = capacity
        self.bindings = Bindings(registry.engine)
        self.central_region = central_region
        self._master = master_region
        self._pods: list[Pod] = []
        self._pods_at = float("-inf")  # never (monotonic time may start near 0 after boot)
        self._pods_ttl = pods_ttl
        self._cache: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._cache_size = cache_size
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="gateway-db")
        self._pending: set[asyncio.Task] = set()

    async def _db(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self.capacity is not None:
            self.capacity.close()

    # --- pods ------------------------------------------------------------------
    async def pods(self) -> list[Pod]:
        """Regional pods (never the central one; only the selected ones), ordered by region name."""
        if time.monotonic() - self._pods_at > self._pods_ttl:
            pods = await self._db(self.registry.regional_pods)
            self._pods = [p for p in pods if p.region_name != self.central_region
                          and (not self.selected or p.region_name in self.selected)]
            self._pods_at = time.monotonic()
        return self._pods

    def az_of_regions(self) -> dict[str, str]:
        """Region name -> its top-level AZ, as last loaded (no I/O)."""
        return {p.region_name: p.az_name for p in self._pods}

    async def regions(self) -> list[str]:
        return [p.region_name for p in await self.pods()]

    async def pod(self, region: str) -> Pod | None:
        return next((p for p in await self.pods() if p.region_name == region), None)

    async def master_region(self) -> str:
        """``[gateway] master_region``; with none configured, the one region there is.
        Never "the first by name": registering a pod whose name sorts earlier would
        silently move flavors, keypairs and quotas to it."""
        regions = await self.regions()
        if self._master:
            return self._master
        if not regions:
            raise Fault(503, "No region is registered with the gateway.")
        if len(regions) > 1:
            raise Fault(503, f"Several regions are registered ({', '.join(regions)}) and no master region is "
                             "configured ([gateway] master_region).")
        return regions[0]

    async def availability_zones(self) -> list[str]:
        zones: list[str] = []
        for pod in await self.pods():
            if pod.az_name not in zones:
                zones.append(pod.az_name)
        return zones

    async def regions_in_az(self, az: str) -> list[str]:
        return [p.region_name for p in await self.pods() if p.az_name == az]

    # --- placement ---------------------------------------------------------------
    async def choose(self, project_id: str, az: str | None, sick: Collection[str] = ()) -> Pod:
        """Where a new server/volume of ``project_id`` goes: the project's oldest
        binding that fits the AZ (an admin sets a preference by creating one through
        the Admin API); else a new binding, to the region of that AZ with the most
        free capacity (policy ``most_free_capacity``) or the fewest bound projects
        (tenants spread over regions, never all on the first by name), leaving out
        regions in ``sick`` (their breaker is open) while any other fits. An
        existing binding never moves. Unknown AZ: 400, nothing bound."""
        pods = await self.pods()
        if not pods:
            raise Fault(503, "No region is available for new resources.")
        candidates = [p for p in pods if not az or p.az_name == az]
        if not candidates:
            raise Fault(400, f"The requested availability zone is not available: {az}")
        by_id = {p.pod_id: p for p in candidates}
        for binding in await self._db(self.bindings.list, project_id):
            if binding.pod_id in by_id:
                return by_id[binding.pod_id]
        healthy = [p for p in candidates if p.region_name not in sick] or candidates
        counts = await self._db(self.bindings.counts)
        by_region = {p.region_name: p for p in healthy}

        def fewest_projects(region: str) -> tuple[int, str]:
            return (counts.get(by_region[region].pod_id, 0), region)

        if self.capacity is not None and len(healthy) > 1:
            room = await self.capacity.of(by_region)
            chosen = by_region[rank_by_capacity(by_region, room, fewest_projects)[0]]
        else:
            chosen = by_region[min(by_region, key=fewest_projects)]
        await self._db(self.bindings.bind, project_id, chosen.pod_id)
        return chosen

    # --- id -> region -------------------------------------------------------------
    def _remember(self, kind: str, resource_id: str, region: str) -> None:
        self._cache[(kind, resource_id)] = region
        self._cache.move_to_end((kind, resource_id))
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def region_of(self, kind: str, resource_id: str) -> str | None:
        cached = self._cache.get((kind, resource_id))
        if cached:
            return cached
        rows = await self._db(self.registry.routings_of, resource_id, kind)
        if not rows:
            return None
        pods = {p.pod_id: p.region_name for p in await self.pods()}
        region = pods.get(rows[0].pod_id)
        if region:
            self._remember(kind, resource_id, region)
        return region

    async def visible_to(self, kind: str, resource_id: str, identity) -> bool:
        """Whether the routing table says ``identity`` may see the object (its own
        project's, or an admin): so that an answer that names another region tells a
        stranger nothing (a 404, as the region would answer that caller)."""
        if identity.is_admin:
            return True
        rows = await self._db(self.registry.routings_of, resource_id, kind)
        return any(row.project_id == identity.project_id for row in rows)

    async def record(self, kind: str, resource_id: str, region: str, project_id: str) -> None:
        """Persist a routing now (creates): raises if the database refuses."""
        pod = await self.pod(region)
        if pod is None:
            raise LookupError(f"region {region} is not a registered pod")
        await self._db(self.registry.ensure_routing, resource_id, resource_id, pod.pod_id,
                       project_id or "-", kind)
        self._remember(kind, resource_id, region)

    def adopt(self, kind: str, items: list[tuple[str, str, str]]) -> None:
        """Resources seen in a list: (id, region, project). Cached at once, persisted
        in the background (a lost write is redone at the next sighting)."""
        fresh = [(i, r, p) for i, r, p in items if self._cache.get((kind, i)) != r]
        for resource_id, region, _ in fresh:
            self._remember(kind, resource_id, region)
        if not fresh:
            return

        async def persist() -> None:
            try:
                for resource_id, region, project in fresh:
                    await self.record(kind, resource_id, region, project)
            except Exception:  # noqa: BLE001 - a background task: logged, the routing is adopted again later
                LOG.exception("adopting %d %s routings failed", len(fresh), kind)

        task = asyncio.get_running_loop().create_task(persist())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def forget(self, kind: str, resource_id: str) -> None:
        self._cache.pop((kind, resource_id), None)
        await self._db(self.registry.forget, resource_id, kind)

    # --- regional copies of a gateway object (top id -> one id per region) --------
    async def copies(self, kind: str, top_id: str) -> dict[str, str]:
        """Region -> regional id of each recorded copy of ``top_id``."""
        rows = await self._db(self.registry.routings_of, top_id, kind)
        regions = {p.pod_id: p.region_name for p in await self.pods()}
        return {regions[r.pod_id]: r.bottom_id for r in rows if r.pod_id in regions and r.bottom_id}

    async def record_copy(self, kind: str, top_id: str, bottom_id: str, region: str, project_id: str) -> str:
        """Record a copy unless another process recorded one first (the unique key
        (top_id, pod, kind) decides); returns the regional id that won."""
        pod = await self.pod(region)
        if pod is None:
            raise LookupError(f"region {region} is not a registered pod")
        try:
            await self._db(self.registry.create_routing, top_id, bottom_id, pod.pod_id, project_id or "-", kind)
            return bottom_id
        except Conflict:
            row = await self._db(self.registry.find_routing, top_id, pod.pod_id, kind)
            if row is None or not row.bottom_id:
                raise
            return row.bottom_id

    async def top_of(self, kind: str, bottom_id: str) -> str | None:
        """The gateway id a regional copy stands for (None: not a recorded copy)."""
        rows = await self._db(self.registry.list_routings, {"bottom_id": bottom_id, "resource_type": kind}, 1)
        return rows[0].top_id if rows else None

    async def forget_copy(self, kind: str, top_id: str, region: str) -> None:
        pod = await self.pod(region)
        if pod is not None:
            await self._db(self.registry.forget, top_id, kind, pod.pod_id)

    async def ensure_copy(self, kind: str, top_id: str, bottom_id: str, region: str) -> Routing:
        """The routing row of a copy, created if missing (its id is a stable number)."""
        pod = await self.pod(region)
        if pod is None:
            raise LookupError(f"region {region} is not a registered pod")
        return await self._db(self.registry.ensure_routing, top_id, bottom_id, pod.pod_id, "-", kind)

    async def routing(self, routing_id: int) -> Routing | None:
        try:
            return await self._db(self.registry.get_routing, routing_id)
        except NotFound:
            return None

    async def drain(self) -> None:
        """Wait for background routing writes (tests, shutdown)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
