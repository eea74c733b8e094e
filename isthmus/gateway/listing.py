"""Merged lists: sort specs, k-way merge across regions, global marker/limit.

Each region returns its items already sorted (we forward the sort parameters);
the gateway merges the sorted streams, so a page costs O(limit) per region.

A page ends with item M (the ``marker`` of the next page). To continue after M,
every region must resume where *it* left off: the region that owns M resumes
after M, another region resumes after the last of its items that was shown.
Those per-region cursors are remembered per (query, marker) for the pages this
process served, and resuming from them repeats the merge exactly, even where a
region's order is finer than what its bodies show (Nova orders by created_at with
microseconds and shows whole seconds). For a marker it has not seen (another
gateway process, a marker typed by hand) it reads M's sort values from its region
and skips, in every other region, the items that sort before it: correct up to
such hidden ties, and slower.
"""

from __future__ import annotations

import heapq
import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Item = dict[str, Any]


class InvalidSort(ValueError):
    """A sort_key/sort_dir/sort parameter the gateway cannot honour (400)."""


class MarkerLost(Exception):
    """A region no longer knows the native marker a stream resumes from (deleted since)."""


@dataclass(frozen=True)
class SortKey:
    field: str  # as it appears in the response body
    desc: bool
    param: str = ""  # the sort key the region is asked for (default: field)

    @property
    def forward(self) -> str:
        return self.param or self.field


# Nova's sort_key values name DB columns; the body shows some of them elsewhere.
NOVA_FIELDS = {
    "created_at": "created", "updated_at": "updated",  # Nova's body names them so
    "uuid": "id", "display_name": "name", "display_description": "description",
    "vm_state": "OS-EXT-STS:vm_state", "task_state": "OS-EXT-STS:task_state",
    "power_state": "OS-EXT-STS:power_state", "launched_at": "OS-SRV-USG:launched_at",
    "terminated_at": "OS-SRV-USG:terminated_at", "availability_zone": "OS-EXT-AZ:availability_zone",
    "host": "OS-EXT-SRV-ATTR:host", "node": "OS-EXT-SRV-ATTR:hypervisor_hostname",
    "hostname": "OS-EXT-SRV-ATTR:hostname", "launch_index": "OS-EXT-SRV-ATTR:launch_index",
    "root_device_name": "OS-EXT-SRV-ATTR:root_device_name", "kernel_id": "OS-EXT-SRV-ATTR:kernel_id",
    "ramdisk_id": "OS-EXT-SRV-ATTR:ramdisk_id",
}
CINDER_FIELDS = {"display_name": "name", "display_description": "description"}
DEFAULT = (SortKey("created_at", True), SortKey("id", True))
# Nova breaks created_at ties by its internal integer id, which the API never shows:
# the gateway asks every region for created_at then uuid, an order it can reproduce.
NOVA_DEFAULT = (SortKey("created", True, "created_at"), SortKey("id", True, "uuid"))


def nova_sort(query: Mapping[str, Sequence[str]]) -> tuple[SortKey, ...]:
    """Nova: repeated ``sort_key``/``sort_dir``; default created_at desc, id desc."""
    keys = list(query.get("sort_key", []))
    dirs = list(query.get("sort_dir", []))
    if not keys:
        return NOVA_DEFAULT
    if len(dirs) > len(keys):
        raise InvalidSort("more sort_dir than sort_key parameters")
    dirs += ["desc"] * (len(keys) - len(dirs))
    return _with_tiebreak([SortKey(NOVA_FIELDS.get(k, k), _desc(d), k) for k, d in zip(keys, dirs, strict=True)],
                          "uuid")


def cinder_sort(query: Mapping[str, Sequence[str]]) -> tuple[SortKey, ...]:
    """Cinder: ``sort=k1:dir,k2`` or the older ``sort_key``/``sort_dir``; same default."""
    if query.get("sort"):
        if query.get("sort_key") or query.get("sort_dir"):
            raise InvalidSort("sort cannot be combined with sort_key/sort_dir")
        specs = []
        for part in ",".join(query["sort"]).split(","):
            name, _, direction = part.strip().partition(":")
            if not name:
                raise InvalidSort(f"bad sort parameter {part!r}")
            specs.append(SortKey(CINDER_FIELDS.get(name, name), _desc(direction or "desc"), name))
        return _with_tiebreak(specs)
    keys = list(query.get("sort_key", []))
    if not keys:
        return DEFAULT
    dirs = list(query.get("sort_dir", [])) or ["desc"]
    return _with_tiebreak([SortKey(CINDER_FIELDS.get(k, k), _desc(dirs[min(i, len(dirs) - 1)]), k)
                           for i, k in enumerate(keys)])


def _desc(direction: str) -> bool:
    direction = direction.strip().lower()
    if direction not in ("asc", "desc"):
        raise InvalidSort(f"sort direction {direction!r} must be asc or desc")
    return direction == "desc"


def _with_tiebreak(keys: list[SortKey], id_param: str = "id") -> tuple[SortKey, ...]:
    """End with the id (asked of the regions too): a total order every region and the
    gateway agree on."""
    if not any(k.field == "id" for k in keys):
        keys.append(SortKey("id", keys[-1].desc if keys else True, id_param))
    return tuple(keys)


def nova_params(spec: Sequence[SortKey]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key in spec:
        out += [("sort_key", key.forward), ("sort_dir", "desc" if key.desc else "asc")]
    return out


def cinder_params(spec: Sequence[SortKey]) -> list[tuple[str, str]]:
    return [("sort", ",".join(f"{k.forward}:{'desc' if k.desc else 'asc'}" for k in spec))]


# --- comparable keys -----------------------------------------------------------

_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}")


def _scalar(value: Any) -> tuple:
    """A value that compares across types and formats: None first, then numbers, then
    timestamps (any ISO-8601 form, naive = UTC), then strings."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        if _ISO.match(value):
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
                if parsed.tzinfo is None:
                    parsed = parsed.replace(tzinfo=UTC)
                return (2, parsed.timestamp(), "")
            except ValueError:
                pass
        return (3, value)
    return (4, str(value))


class _Reversed:
    """Inverts the order of a comparable (for descending keys) without negating it."""

    __slots__ = ("value",)

    def __init__(self, value: tuple) -> None:
        self.value = value

    def __lt__(self, other: _Reversed) -> bool:
        return other.value < self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reversed) and self.value == other.value


def sort_key(spec: Sequence[SortKey]) -> Callable[[Item], tuple]:
    def key(item: Item) -> tuple:
        out = []
        for k in spec:
            value = _scalar(item.get(k.field))
            out.append(_Reversed(value) if k.desc else value)
        return tuple(out)
    return key


# --- per-region streams and the merge ---------------------------------------------

Fetch = Callable[[str | None, int], Awaitable[tuple[list[Item], bool]]]
"""fetch(region_marker, limit) -> (items in region order, whether more may follow)."""


@dataclass
class RegionStream:
    """One region's items in its own order, fetched a page at a time.

    A stream resumes from ``marker``. When that is exactly where this region stopped
    on the previous page (``exact``), the merge simply goes on. Otherwise it skips
    what sorts at or before ``after`` (the global marker's key)."""

    region: str
    fetch: Fetch
    page_size: int
    marker: str | None = None  # region-native marker to resume from
    after: tuple | None = None
    key: Callable[[Item], tuple] = field(default=lambda item: ())
    exact: bool = False
    _buffer: list[Item] = field(default_factory=list)
    _more: bool = True

    async def prime(self) -> None:
        await self._fill()

    async def _fill(self) -> None:
        while not self._buffer and self._more:
            try:
                items, more = await self.fetch(self.marker, self.page_size)
            except MarkerLost:
                self.marker, self.exact = None, False  # from the start; the key filter recovers
                continue
            self._more = more and bool(items)
            if items:
                self.marker = items[-1]["id"]
            if self.after is not None and not self.exact:
                items = [i for i in items if self.after < self.key(i)]
            self._buffer = items

    async def head(self) -> Item | None:
        if not self._buffer:
            await self._fill()
        return self._buffer[0] if self._buffer else None

    def pop(self) -> Item:
        return self._buffer.pop(0)


async def merge(streams: Sequence[RegionStream], key: Callable[[Item], tuple],
                limit: int) -> tuple[list[tuple[str, Item]], bool]:
    """Take up to ``limit`` items in global order; also say whether more remain."""
    heap: list[tuple[tuple, int, RegionStream]] = []
    counter = itertools.count()
    for stream in streams:
        head = await stream.head()
        if head is not None:
            heap.append((key(head), next(counter), stream))
    heapq.heapify(heap)
    out: list[tuple[str, Item]] = []
    while heap and len(out) < limit:
        _, _, stream = heapq.heappop(heap)
        out.append((stream.region, stream.pop()))
        head = await stream.head()
        if head is not None:
            heapq.heappush(heap, (key(head), next(counter), stream))
    return out, bool(heap)


async def merge_page(streams: Sequence[RegionStream], key: Callable[[Item], tuple], limit: int,
                     offset: int = 0) -> tuple[list[tuple[str, Item]], list[tuple[str, Item]]]:
    """(page, consumed): ``limit`` items after skipping ``offset`` in the global order
    (a region's own offset would count only its objects), and all that was taken from
    the streams, the skipped included, which the next page's cursor must resume after."""
    consumed, _ = await merge(streams, key, offset + limit)
    return consumed[offset:], consumed


# --- cursors for the next page ----------------------------------------------------


def page_is_full(shown: int, limit: int) -> bool:
    """Whether a page gets a ``next`` link. Nova and Cinder link one whenever a page is
    as long as the limit (the requested one, else the maximum), even if nothing
    follows: a client pages until a short page, and Tempest checks for the link."""
    return shown > 0 and shown >= limit



@dataclass(frozen=True)
class Cursor:
    """Where each region resumes after a page that ended with ``marker``."""

    markers: Mapping[str, str | None]  # region -> native marker (None: from the start)
    after: tuple  # sort key of the global marker
    exact: bool = True  # markers say where every region stopped (a page this process served)

    def stream_is_exact(self, region: str) -> bool:
        return self.exact or self.markers.get(region) is not None


class CursorCache:
    """Bounded LRU of page-end cursors, keyed by (list identity, marker id)."""

    def __init__(self, size: int = 4096) -> None:
        self._items: OrderedDict[tuple, Cursor] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def put(self, scope: tuple, marker: str, cursor: Cursor) -> None:
        with self._lock:
            self._items[(scope, marker)] = cursor
            self._items.move_to_end((scope, marker))
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def get(self, scope: tuple, marker: str) -> Cursor | None:
        with self._lock:
            cursor = self._items.get((scope, marker))
            if cursor is not None:
                self._items.move_to_end((scope, marker))
            return cursor


def next_cursor(page: Sequence[tuple[str, Item]], start: Mapping[str, str | None],
                key: Callable[[Item], tuple]) -> Cursor:
    markers = dict(start)
    for region, item in page:
        markers[region] = item["id"]
    return Cursor(markers, key(page[-1][1]))


async def aiter_list(items: list[Item]) -> AsyncIterator[Item]:  # pragma: no cover - helper for tests
    for item in items:
        yield item
