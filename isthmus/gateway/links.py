"""Rewriting what regions return so that nothing points past the gateway."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable
from urllib.parse import urlsplit

_VERSION_SEGMENT = re.compile(r"^v\d+(\.\d+)?$")


def service_root(endpoint: str) -> str:
    """``http://h:8774/compute/v2.1/abc`` -> ``http://h:8774/compute``: the part of a
    catalog URL that precedes the version segment (links are built under it)."""
    parts = urlsplit(endpoint)
    segments = [s for s in parts.path.split("/") if s]
    kept: list[str] = []
    for segment in segments:
        if _VERSION_SEGMENT.match(segment):
            break
        kept.append(segment)
    path = "/" + "/".join(kept) if kept else ""
    return f"{parts.scheme}://{parts.netloc}{path}"


def strip_project(endpoint: str) -> str:
    """Drop a ``$(project_id)s``/``$(tenant_id)s`` template (and what follows) from a
    catalog URL: the gateway forwards the rest of the path, project segment included."""
    for template in ("$(project_id)s", "$(tenant_id)s", "%(project_id)s", "%(tenant_id)s"):
        if template in endpoint:
            endpoint = endpoint.split(template, 1)[0]
    return endpoint.rstrip("/")


class Rewriter:
    """Replaces regional service roots by the gateway's root in a body or a header."""

    def __init__(self, regional_roots: Iterable[str], gateway_root: str) -> None:
        roots = sorted({r.rstrip("/") for r in regional_roots if r}, key=len, reverse=True)
        self.gateway_root = gateway_root.rstrip("/")
        # A root matches only as a whole origin/path prefix: ":2101" must not eat ":21011".
        self._pattern = (re.compile("(?:" + "|".join(re.escape(r) for r in roots) + r")(?=[/\"'?#\s,)]|$)")
                         if roots else None)
        self._bytes_pattern = re.compile(self._pattern.pattern.encode()) if self._pattern is not None else None
        self._longest = max((len(r.encode()) for r in roots), default=0)

    def text(self, value: str) -> str:
        if self._pattern is None:
            return value
        return self._pattern.sub(lambda _m: self.gateway_root, value)

    def body(self, raw: bytes) -> bytes:
        if self._pattern is None or not raw:
            return raw
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
        return self.text(text).encode("utf-8")


    async def stream(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """``body`` over a stream: the same result for any chunking. A tail as long
        as the longest root (plus the one byte the match looks at) is held back, so
        a root split across chunks is still found, and a root at the very end of a
        chunk is not taken for one at the end of the body."""
        pattern = self._bytes_pattern
        if pattern is None:
            async for chunk in chunks:
                yield chunk
            return
        root = self.gateway_root.encode()
        keep = self._longest + 1
        buf = b""
        async for chunk in chunks:
            buf += chunk
            if len(buf) <= keep:
                continue
            cut = len(buf) - keep
            out: list[bytes] = []
            pos = 0
            for match in pattern.finditer(buf):
                if match.end() > cut:
                    cut = max(pos, min(cut, match.start()))
                    break
                out += [buf[pos:match.start()], root]
                pos = match.end()
            out.append(buf[pos:cut])
            buf = buf[cut:]
            yield b"".join(out)
        yield pattern.sub(root, buf)


def hide_hosts(text: str, hosts: Iterable[str]) -> str:
    """Fault messages must not name regional endpoints: replace any host:port left."""
    for host in sorted(set(hosts), key=len, reverse=True):
        if host:
            text = text.replace(host, "<region>")
    return text
