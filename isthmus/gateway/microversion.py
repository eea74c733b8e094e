"""Microversion negotiation: parse the request header, intersect region ranges."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Version = tuple[int, int]

_VERSION = re.compile(r"^(\d+)\.(\d+)$")


class BadVersion(ValueError):
    """The requested microversion is malformed or outside the supported range (406)."""


def parse(text: str) -> Version:
    match = _VERSION.match(text.strip())
    if not match:
        raise BadVersion(f"Version {text!r} is not a valid microversion")
    return int(match.group(1)), int(match.group(2))


def fmt(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


@dataclass(frozen=True)
class Range:
    min: Version
    max: Version

    def __contains__(self, version: object) -> bool:
        return isinstance(version, tuple) and self.min <= version <= self.max


def intersect(ranges: Iterable[Range]) -> Range | None:
    """The versions every region supports; None if they share none (or no region is known)."""
    ranges = list(ranges)
    if not ranges:
        return None
    low = max(r.min for r in ranges)
    high = min(r.max for r in ranges)
    return Range(low, high) if low <= high else None


@dataclass(frozen=True)
class Service:
    """How one API names its microversion header."""

    header_service: str  # "compute" / "volume"
    legacy_header: str | None  # Nova's X-OpenStack-Nova-API-Version
    default: Version  # what "no header" means


COMPUTE = Service("compute", "X-OpenStack-Nova-API-Version", (2, 1))
VOLUME = Service("volume", None, (3, 0))


def requested(headers: Mapping[str, str], service: Service, supported: Range) -> Version:
    """The version a request asks for, validated against ``supported``.

    ``OpenStack-API-Version: <service> X.Y`` wins over the legacy header; no header
    means the service's default (2.1 / 3.0); ``latest`` means ``supported.max``.
    Anything malformed, for another service, or outside the range is BadVersion.
    """
    value = _header(headers, "OpenStack-API-Version")
    if value is not None:
        text = _pick_service(value, service.header_service)
    elif service.legacy_header and _header(headers, service.legacy_header) is not None:
        text = (_header(headers, service.legacy_header) or "").strip()
    else:
        return service.default
    if text.lower() == "latest":
        return supported.max
    version = parse(text)
    if version not in supported:
        raise BadVersion(
            f"Version {fmt(version)} is not supported by the API. Minimum is {fmt(supported.min)} "
            f"and maximum is {fmt(supported.max)}."
        )
    return version


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None


def _pick_service(value: str, service: str) -> str:
    """``compute 2.30`` -> ``2.30``; comma-separated entries for several services are allowed."""
    found: str | None = None
    for entry in value.split(","):
        parts = entry.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise BadVersion(f"OpenStack-API-Version {entry.strip()!r} must be '<service> <version>'")
        name, version = parts
        if name.lower() == service:
            if found is not None:
                raise BadVersion(f"OpenStack-API-Version names {service} twice")
            found = version
    if found is None:
        # As Trio2o: a header that names no version for this
        # service (wrong prefix, bare "2.30") is an error, not "use the default".
        raise BadVersion(f"OpenStack-API-Version {value!r} names no {service} version")
    return found


def response_headers(service: Service, version: Version) -> dict[str, str]:
    """What every reply carries, as the service itself sends it (Nova adds its
    legacy header, which older clients and Tempest's schema checks read)."""
    out = {"OpenStack-API-Version": f"{service.header_service} {fmt(version)}", "Vary": "OpenStack-API-Version"}
    if service.legacy_header:
        out[service.legacy_header] = fmt(version)
        out["Vary"] = f"OpenStack-API-Version, {service.legacy_header}"
    return out


def forward_headers(service: Service, version: Version) -> dict[str, str]:
    """What a region receives: always explicit, so every region runs the same version."""
    out = {"OpenStack-API-Version": f"{service.header_service} {fmt(version)}"}
    if service.legacy_header:
        out[service.legacy_header] = fmt(version)
    return out
