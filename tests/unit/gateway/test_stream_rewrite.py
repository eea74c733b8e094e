"""Streaming link rewriting gives the same body as rewriting it whole, for any chunking."""

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from isthmus.gateway.links import Rewriter

ROOTS = ["http://127.0.0.1:2101/compute", "http://127.0.0.1:21011/compute", "http://10.0.0.2:8774"]
PIECES = st.sampled_from(ROOTS + ["/v2.1/servers/x", '"', "1", " ", "http://127.0.0.1:2101", "é", "abc", ","])


async def collect(rewriter, chunks):
    async def source():
        for c in chunks:
            yield c
    return b"".join([part async for part in rewriter.stream(source())])


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=40), st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=30))
def test_stream_equals_whole_body_for_any_chunking(pieces, cuts):
    body = "".join(pieces).encode()
    rewriter = Rewriter(ROOTS, "http://gw:9/compute")
    chunks, pos, n = [], 0, 0
    while pos < len(body):
        size = cuts[n % len(cuts)]
        chunks.append(body[pos:pos + size])
        pos += size
        n += 1
    assert asyncio.run(collect(rewriter, chunks)) == rewriter.body(body)
