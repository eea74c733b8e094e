"""Rewriting what regions return so that nothing points past the gateway."""

from __future__ import annotations

import re
from collections.abc import Iterable
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


def hide_hosts(text: str, hosts: Iterable[str]) -> str:
    """Fault messages must not name regional endpoints: replace any host:port left."""
    for host in sorted(set(hosts), key=len, reverse=True):
        if host:
            text = text.replace(host, "<region>")
    return text
