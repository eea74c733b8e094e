"""Watch, don't poll: caches fed by one LIST then a WATCH, and a work queue.

The :class:`Informer` thread lists a resource once, then follows a watch
from the list's resourceVersion. A stream the server ends
(``timeoutSeconds``) or that stays idle past its read timeout is resumed
from the last resourceVersion seen, without a new LIST; only a 410 Gone (the
version is too old) or another error makes it LIST again, after a backoff
for errors. Each event updates the :class:`Cache`; an object whose content
changed (not merely its resourceVersion, which every kubelet status write
bumps on a Node) is handed to ``on_change`` (and to every subscriber), which
enqueues its key.

The informer knows the resource only through a :class:`ResourceAPI`
(``list_with_version``, ``watch``, ``stop_watch``): Nodes
(:class:`~isthmus.ccm.kube.nodes.NodeAPI`, keyed by name) and Services
(``isthmus.ccm.controllers.service.ServiceAPI``, keyed
``namespace/name``) share this loop.

The :class:`WorkQueue` holds keys, each at most once, and a per-key
backoff (5 ms doubling to 1000 s, client-go's default) for keys whose
work failed: an event for an object that is backing off does not cut its
wait short, the retry comes when the backoff ends and reads the latest state
from the cache then.
"""

from __future__ import annotations

import heapq
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from isthmus.ccm.kube.nodes import NodeView, WatchEvent

LOG = logging.getLogger(__name__)


@dataclass
class Backoff:
    """Per-key exponential backoff: 5 ms doubling to 1000 s, as client-go's default."""

    base: float = 0.005
    cap: float = 1000.0
    clock: Callable[[], float] = time.monotonic
    _next: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (due, delay)

    def due(self, key: str) -> bool:
        entry = self._next.get(key)
        return entry is None or self.clock() >= entry[0]

    def failed(self, key: str) -> float:
        delay = min(self.cap, self._next.get(key, (0.0, self.base / 2))[1] * 2)
        self._next[key] = (self.clock() + delay, delay)
        return delay

    def succeeded(self, key: str) -> None:
        self._next.pop(key, None)


class View(Protocol):
    """What a cache needs of a view: its resourceVersion and a content comparison."""

    @property
    def resource_version(self) -> str: ...  # read-only: views are frozen dataclasses

    def same_content(self, other: Any) -> bool:
        """Equal but for the resourceVersion."""
        ...


V = TypeVar("V", bound=View)


class ResourceAPI(Protocol):
    """What the :class:`Informer` needs of a resource's API; every request has a timeout."""

    def list_with_version(self) -> tuple[list[Any], str]:
        """Every object (as views) and the list's resourceVersion."""
        ...

    def watch(self, resource_version: str, timeout_seconds: int, read_timeout: float) -> Iterator[WatchEvent]:
        """Events after ``resource_version``; raises on errors (410 when it is too old)."""
        ...

    def stop_watch(self) -> None:
        """Unblock a running watch (shutdown), from another thread."""
        ...


class Cache(Generic[V]):
    """Key -> latest view; thread-safe. ``synced`` once the first LIST is in."""

    def __init__(self, key: Callable[[V], str]) -> None:
        self._key = key
        self._items: dict[str, V] = {}
        self._lock = threading.Lock()
        self.synced = threading.Event()

    def replace(self, views: Iterable[V]) -> list[str]:
        """Install a full LIST; returns the keys added, changed or gone."""
        fresh = {self._key(v): v for v in views}
        with self._lock:
            old, self._items = self._items, fresh
        changed = [k for k, v in fresh.items() if not v.same_content(old.get(k))]
        self.synced.set()
        return changed + [k for k in old if k not in fresh]

    def apply(self, event: WatchEvent) -> str | None:
        """One watch event; returns the object's key if its content changed."""
        view = event.obj
        if view is None:  # BOOKMARK: only the resourceVersion moves
            return None
        key = self._key(view)
        with self._lock:
            old = self._items.get(key)
            if event.type == "DELETED":
                return key if self._items.pop(key, None) is not None else None
            self._items[key] = view
        return None if view.same_content(old) else key

    def get(self, key: str) -> V | None:
        with self._lock:
            return self._items.get(key)

    def list(self) -> list[V]:
        """Every cached view, in key order."""
        with self._lock:
            return [self._items[k] for k in sorted(self._items)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class NodeCache(Cache[NodeView]):
    """Node name -> latest NodeView."""

    def __init__(self) -> None:
        super().__init__(lambda v: v.name)


@dataclass
class WorkQueue:
    """Keys to reconcile (Node names, Service keys): deduplicated, FIFO, with per-key backoff on failure."""

    backoff: Backoff = field(default_factory=Backoff)
    clock: Callable[[], float] = time.monotonic
    _ready: dict[str, None] = field(default_factory=dict)  # insertion-ordered set
    _delayed: list[tuple[float, str]] = field(default_factory=list)  # heap of (due, name)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def add(self, name: str) -> None:
        """Queue ``name`` now, unless it is backing off (its retry is already scheduled)."""
        with self._cond:
            if not self.backoff.due(name) or name in self._ready:
                return
            self._ready[name] = None
            self._cond.notify()

    def add_all(self, names: Iterable[str]) -> None:
        for name in names:
            self.add(name)

    def retry(self, name: str) -> float:
        """The work on ``name`` failed: queue it again after its next backoff delay."""
        delay = self.backoff.failed(name)
        with self._cond:
            heapq.heappush(self._delayed, (self.clock() + delay, name))
            self._cond.notify()
        return delay

    def forget(self, name: str) -> None:
        """The work succeeded (or the Node is gone): its backoff starts over."""
        self.backoff.succeeded(name)

    def get(self, timeout: float = 0.0) -> str | None:
        """The next due name, waiting up to ``timeout`` seconds; None if none."""
        deadline = self.clock() + timeout
        with self._cond:
            while True:
                self._promote()
                if self._ready:
                    name = next(iter(self._ready))
                    del self._ready[name]
                    return name
                left = deadline - self.clock()
                if self._delayed:
                    left = min(left, self._delayed[0][0] - self.clock())
                if left <= 0 and deadline <= self.clock():
                    return None
                self._cond.wait(max(left, 0.001))

    def _promote(self) -> None:
        now = self.clock()
        while self._delayed and self._delayed[0][0] <= now:
            _, name = heapq.heappop(self._delayed)
            self._ready[name] = None

    def __len__(self) -> int:
        """Depth: names ready now plus names waiting for their backoff."""
        with self._cond:
            return len(self._ready) + len({n for _, n in self._delayed} - self._ready.keys())

    def wake(self) -> None:
        """Wake a waiting ``get`` (shutdown, leadership change)."""
        with self._cond:
            self._cond.notify_all()


@dataclass
class WatchSettings:
    """client-go's reflector choices: server-side timeout random in [5, 10) min."""

    min_timeout: int = 300
    read_timeout: float = 120.0  # no byte for this long: resume the watch (half-open connection)
    error_backoff: float = 1.0
    error_backoff_cap: float = 30.0


@dataclass
class Informer:
    """LIST once, then WATCH, into ``cache``; ``on_change`` gets each changed key.

    ``api`` is the resource's :class:`ResourceAPI` (a ``NodeAPI`` for Nodes);
    ``kind`` names the resource in logs. Other parties interested in the
    same changes (the service controller, in the Node informer's)
    :meth:`subscribe` before :meth:`run` starts.
    """

    api: ResourceAPI
    cache: Cache[Any]
    on_change: Callable[[str], None]
    settings: WatchSettings = field(default_factory=WatchSettings)
    on_restart: Callable[[str], None] = lambda reason: None  # metrics: why a watch ended
    kind: str = "node"
    _resource_version: str = ""
    _subscribers: list[Callable[[str], None]] = field(default_factory=list)

    def subscribe(self, handler: Callable[[str], None]) -> None:
        """``handler`` gets every changed key too, after ``on_change``."""
        self._subscribers.append(handler)

    def _changed(self, key: str) -> None:
        self.on_change(key)
        for handler in self._subscribers:
            handler(key)

    def relist(self) -> None:
        """One LIST into the cache; changed keys go to ``on_change``."""
        views, self._resource_version = self.api.list_with_version()
        for key in self.cache.replace(views):
            self._changed(key)

    def watch_once(self) -> None:
        """Follow one watch stream to its end; raises on errors (410 included)."""
        timeout = random.randint(self.settings.min_timeout, 2 * self.settings.min_timeout - 1)
        for event in self.api.watch(self._resource_version, timeout, self.settings.read_timeout):
            if event.resource_version:
                self._resource_version = event.resource_version
            key = self.cache.apply(event)
            if key is not None:
                self._changed(key)

    def run(self, stop: threading.Event) -> None:
        """LIST and WATCH until ``stop``; errors re-LIST after a capped backoff.

        A stream that ends (server timeout) or idles out on our side is
        resumed from the resourceVersion held: nothing was missed, so no LIST.
        """
        delay = self.settings.error_backoff
        need_list = True
        while not stop.is_set():
            try:
                if need_list:
                    self.relist()
                    need_list, delay = False, self.settings.error_backoff
                self.watch_once()
                reason = "expired"
            except Exception as exc:  # noqa: BLE001 - classified; this thread must survive anything
                if stop.is_set():
                    return
                reason = classify_watch_error(exc)
                if reason == "gone":
                    LOG.info("%s watch: resourceVersion too old (410 Gone): listing again", self.kind)
                    need_list = True
                elif reason == "error":
                    LOG.warning("%s watch failed (listing again in %.0fs): %s", self.kind, delay, exc)
                    need_list = True
                    stop.wait(delay)
                    delay = min(self.settings.error_backoff_cap, delay * 2)
            self.on_restart(reason)

    def stop(self) -> None:
        self.api.stop_watch()


def classify_watch_error(exc: BaseException) -> str:
    """``gone`` (410: LIST again), ``idle`` (read timeout: resume) or ``error``."""
    if getattr(exc, "status", None) == 410:
        return "gone"
    import urllib3.exceptions

    if isinstance(exc, urllib3.exceptions.ReadTimeoutError):
        return "idle"
    if isinstance(exc, urllib3.exceptions.ProtocolError) and "timed out" in str(exc):
        return "idle"
    return "error"
