"""Go's ``time.ParseDuration`` grammar (``1m30s``, ``1.5h``, ``-2s``, ``500ms``),
the one duration syntax of the Kubernetes world: OCCM's ``cloud.conf`` and
annotations (the CCM) and the operator's custom resources both take it."""

from __future__ import annotations

import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """A Go duration in seconds; ValueError for anything Go refuses."""
    sign, body = 1.0, text
    if body[:1] in "+-" and body:
        sign, body = (-1.0 if body[0] == "-" else 1.0), body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    total, pos = 0.0, 0
    while pos < len(body):
        match = _PART.match(body, pos)
        if not match or match.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text!r}")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return sign * total
