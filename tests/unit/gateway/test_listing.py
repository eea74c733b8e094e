import asyncio
import random
from typing import Any

import pytest

from isthmus.gateway import listing


def servers(prefix, n, start=0):
    # created_at with ties across regions, so the id tiebreak matters
    return [{"id": f"{prefix}{i:03d}", "created_at": f"2024-01-01T00:00:{(start + i) // 2:02d}Z",
             "name": f"{prefix}{i}"}
            for i in range(n)]


def region_fetch(items, spec, calls=None):
    ordered = sorted(items, key=listing.sort_key(spec))

    async def fetch(marker, n):
        if calls is not None:
            calls.append((marker, n))
        start = 0
        if marker:
            start = next(i for i, it in enumerate(ordered) if it["id"] == marker) + 1
        page = ordered[start:start + n]
        return page, start + n < len(ordered)
    return fetch


async def page_through(regions, spec, limit, cache=None, use_cache=True, fetcher=None):
    key = listing.sort_key(spec)
    fetcher = fetcher or (lambda items: region_fetch(items, spec))
    start: dict[str, str | None] = {r: None for r in regions}
    out, cursor, pages = [], None, 0
    while True:
        streams = [listing.RegionStream(r, fetcher(items), limit + 1, start[r], cursor.after if cursor else None,
                                        key, exact=cursor.stream_is_exact(r) if cursor else True)
                   for r, items in regions.items()]
        await asyncio.gather(*(s.prime() for s in streams))
        page, more = await listing.merge(streams, key, limit)
        pages += 1
        out += [item["id"] for _, item in page]
        if not more:
            return out, pages
        cursor = listing.next_cursor(page, start, key)
        if use_cache:
            start = dict(cursor.markers)
        else:  # what a cold process does: marker's owner resumes natively, others filter
            owner = page[-1][0]
            start = {r: (page[-1][1]["id"] if r == owner else None) for r in regions}
            cursor = listing.Cursor(start, cursor.after, exact=False)


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("limit", [1, 2, 3, 7, 100])
def test_pages_union_is_the_merged_list(limit, use_cache):
    spec = listing.DEFAULT
    regions = {"A": servers("a", 7), "B": servers("b", 5, start=1), "C": []}
    everything = sorted([s for items in regions.values() for s in items], key=listing.sort_key(spec))
    ids, pages = asyncio.run(page_through(regions, spec, limit, use_cache=use_cache))
    assert ids == [s["id"] for s in everything]
    assert pages == max(1, -(-len(everything) // limit))


def test_default_order_is_created_at_desc_then_id_desc():
    items = [{"id": "b", "created_at": "2024-01-01T00:00:01Z"}, {"id": "a", "created_at": "2024-01-01T00:00:01Z"},
             {"id": "c", "created_at": "2024-01-01T00:00:00Z"}]
    assert [i["id"] for i in sorted(items, key=listing.sort_key(listing.DEFAULT))] == ["b", "a", "c"]


def test_timestamps_compare_across_formats():
    a = {"id": "1", "created_at": "2024-01-01T00:00:01.000000"}
    b = {"id": "2", "created_at": "2024-01-01T00:00:02Z"}
    key = listing.sort_key((listing.SortKey("created_at", False),))
    assert key(a) < key(b)


def test_sort_parsing():
    assert listing.nova_sort({"sort_key": ["display_name"], "sort_dir": ["asc"]}) == (
        listing.SortKey("name", False, "display_name"), listing.SortKey("id", False, "uuid"))
    assert listing.cinder_sort({"sort": ["name:asc,created_at"]}) == (
        listing.SortKey("name", False, "name"), listing.SortKey("created_at", True, "created_at"),
        listing.SortKey("id", True, "id"))
    with pytest.raises(listing.InvalidSort):
        listing.cinder_sort({"sort": ["name:up"]})
    with pytest.raises(listing.InvalidSort):
        listing.nova_sort({"sort_key": ["a"], "sort_dir": ["asc", "desc"]})


def test_random_sort_specs_merge_like_a_global_sort():
    rng = random.Random(7)
    for _ in range(30):
        regions = {r: [{"id": f"{r}{i}", "name": rng.choice("xyz"), "size": rng.randint(1, 3),
                        "created_at": f"2024-01-01T00:00:{rng.randint(0, 9):02d}Z"} for i in range(rng.randint(0, 9))]
                   for r in "PQR"}
        spec = listing.cinder_sort({"sort": [rng.choice(["name:asc", "size:desc,name", "created_at:asc"])]})
        everything = sorted([s for items in regions.values() for s in items], key=listing.sort_key(spec))
        ids, _ = asyncio.run(page_through(regions, spec, rng.randint(1, 5), use_cache=rng.random() < .5))
        assert ids == [s["id"] for s in everything]


def test_first_page_asks_each_region_once():
    calls: list[Any] = []
    key = listing.sort_key(listing.DEFAULT)
    streams = [listing.RegionStream(r, region_fetch(servers(r, 10), listing.DEFAULT, calls), 3, key=key)
               for r in "xy"]

    async def run():
        await asyncio.gather(*(s.prime() for s in streams))
        return await listing.merge(streams, key, 2)
    page, more = asyncio.run(run())
    assert len(page) == 2 and more and len(calls) == 2


def test_nova_default_sorts_on_its_body_field_names():
    assert listing.nova_sort({}) == (listing.SortKey("created", True, "created_at"),
                                     listing.SortKey("id", True, "uuid"))
    assert listing.nova_sort({"sort_key": ["created_at"]})[0] == listing.SortKey("created", True, "created_at")


def test_regions_are_asked_for_the_merge_order():
    assert listing.nova_params(listing.nova_sort({})) == [
        ("sort_key", "created_at"), ("sort_dir", "desc"), ("sort_key", "uuid"), ("sort_dir", "desc")]
    assert listing.cinder_params(listing.cinder_sort({"sort": ["name:asc"]})) == [("sort", "name:asc,id:asc")]


def hidden_order_fetch(items):
    """A region that orders by something the body does not show (Nova's microseconds)."""
    async def fetch(marker, n):
        start = 0
        if marker:
            start = next(i for i, it in enumerate(items) if it["id"] == marker) + 1
        return items[start:start + n], start + n < len(items)
    return fetch


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
def test_cached_pages_repeat_the_merge_where_regions_order_by_hidden_values(limit):
    # Same displayed second everywhere; each region's own order disagrees with the ids.
    stamp = "2024-01-01T00:00:05Z"
    regions = {"A": [{"id": i, "created": stamp} for i in ("a1", "a9", "a4", "a7")],
               "B": [{"id": i, "created": stamp} for i in ("b2", "b8", "b3")]}
    spec = listing.NOVA_DEFAULT
    whole, _ = asyncio.run(page_through(regions, spec, 100, fetcher=hidden_order_fetch))
    paged, _ = asyncio.run(page_through(regions, spec, limit, fetcher=hidden_order_fetch))
    assert paged == whole and sorted(whole) == sorted(i["id"] for r in regions.values() for i in r)


def test_a_lost_region_marker_restarts_that_region_behind_the_key_filter():
    spec = listing.DEFAULT
    key = listing.sort_key(spec)
    items = servers("a", 6)
    ordered = sorted(items, key=key)
    plain = region_fetch(items, spec)

    async def fetch(marker, n):
        if marker == "gone":
            raise listing.MarkerLost(marker)
        return await plain(marker, n)
    stream = listing.RegionStream("A", fetch, 10, marker="gone", after=key(ordered[2]), key=key, exact=True)

    async def drain():
        out = []
        while await stream.head() is not None:
            out.append(stream.pop()["id"])
        return out
    assert asyncio.run(drain()) == [i["id"] for i in ordered[3:]]


def test_a_full_page_links_the_next_even_if_nothing_follows():
    # Nova's and Cinder's rule (Tempest pages until a short page, and checks the link).
    assert listing.page_is_full(2, 2) and listing.page_is_full(1000, 1000)
    assert not listing.page_is_full(1, 2)
    assert not listing.page_is_full(0, 0)  # limit=0: an empty page and no link


@pytest.mark.parametrize("offset", [0, 1, 2, 5, 13])
@pytest.mark.parametrize("limit", [1, 3, 100])
def test_offset_counts_in_the_merged_order_and_again_after_the_marker(limit, offset):
    spec = listing.DEFAULT
    key = listing.sort_key(spec)
    regions = {"A": servers("a", 7), "B": servers("b", 5, start=1)}
    everything = [s["id"] for s in sorted([s for items in regions.values() for s in items], key=key)]

    async def one_page(start, cursor):
        streams = [listing.RegionStream(r, region_fetch(items, spec), offset + limit + 1, start[r],
                                        cursor.after if cursor else None, key, exact=True)
                   for r, items in regions.items()]
        await asyncio.gather(*(s.prime() for s in streams))
        return await listing.merge_page(streams, key, limit, offset)

    start = {r: None for r in regions}
    page, consumed = asyncio.run(one_page(start, None))
    assert [i["id"] for _, i in page] == everything[offset:offset + limit]
    if not page:
        return
    # Cinder keeps the offset in the next link: the next page skips it again after the marker.
    cursor = listing.next_cursor(consumed, start, key)
    second, _ = asyncio.run(one_page(dict(cursor.markers), cursor))
    after = offset + limit
    assert [i["id"] for _, i in second] == everything[after + offset:after + offset + limit]
