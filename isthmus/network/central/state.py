"""Central's access to the Isthmus database: the registry and the job queue.

Built once per neutron-server process, on first use, from
``[isthmus] database_connection``. Region lists are cached briefly: they change
when an operator registers a pod, not per request."""

from __future__ import annotations

import threading
import time

from oslo_config import cfg

from isthmus import registry as reg
from isthmus.db import make_engine
from isthmus.db.migration import require_current
from isthmus.jobs import JobStore
from isthmus.lazy import Lazy
from isthmus.network import config

_CACHE_SECONDS = 5.0
# A delete's tombstone is written inside central's transaction (precommit): a
# locked SQLite file may hold that transaction this long per attempt, no more.
_BUSY_TIMEOUT = 10.0


class CentralState:
    def __init__(self, url: str) -> None:
        engine = make_engine(url, busy_timeout=_BUSY_TIMEOUT)
        require_current(engine, "neutron-server (isthmus central plugin)")
        self.registry = reg.Registry(engine)
        self.tombstones = reg.Tombstones(engine)
        self.jobs = JobStore(engine)
        self._pods: tuple[float, list[reg.Pod]] = (float("-inf"), [])
        self._lock = threading.Lock()

    def pods(self) -> list[reg.Pod]:
        with self._lock:
            fetched, pods = self._pods
            if time.monotonic() - fetched > _CACHE_SECONDS:
                pods = self.registry.pods()
                self._pods = (time.monotonic(), pods)
            return pods

    def pod_of_region(self, region: str) -> reg.Pod | None:
        return next((p for p in self.pods() if p.region_name == region), None)

    def regions_for_hints(self, hints: list[str]) -> list[str]:
        return reg.regions_for_hints(self.pods(), hints)

    def az_of_region(self, region: str) -> str | None:
        pod = self.pod_of_region(region)
        return pod.az_name if pod else None


_state: Lazy[CentralState] = Lazy()


def state(conf: cfg.ConfigOpts = cfg.CONF) -> CentralState:
    return _state.get(lambda: _build(conf))


def _build(conf: cfg.ConfigOpts) -> CentralState:
    config.register(conf)
    if not conf.isthmus.database_connection:
        raise RuntimeError("[isthmus] database_connection is not set")
    return CentralState(conf.isthmus.database_connection)
