"""``[LoadBalancer]`` options of cloud.conf, with Isthmus' per-region form.

OCCM reads one ``[LoadBalancer]`` section because it serves one region.
Subnets, networks, floating networks, flavors and availability zones are
region-scoped OpenStack objects, so a multi-region CCM needs them per region:
``[LoadBalancer "RegionTwo"]`` takes any ``[LoadBalancer]`` key and overrides
it for RegionTwo only. OCCM reads ``[LoadBalancer]`` into a struct, so it
silently ignores such subsections: one cloud.conf still serves both.

Keys OCCM knows but Isthmus does not implement are warned about by name
(never silently applied half-way); unknown keys are warned about as in the
rest of the file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from isthmus.ccm.gcfg import parse_bool
from isthmus.kube.durations import parse_duration

DEFAULT_LB_METHOD = "ROUND_ROBIN"
LB_METHODS = ("ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT")


@dataclass(frozen=True)
class LBOptions:
    """The effective options of one region (OCCM's defaults where it has them)."""

    enabled: bool = True
    subnet_id: str = ""
    network_id: str = ""
    member_subnet_id: str = ""
    floating_network_id: str = ""
    lb_method: str = DEFAULT_LB_METHOD
    lb_provider: str = ""  # empty: Octavia's default provider
    flavor_id: str = ""
    availability_zone: str = ""
    internal_lb: bool = False
    create_monitor: bool = False
    manage_security_groups: bool = False  # a group opening the NodePorts on member nodes' ports
    monitor_delay: int = 5  # seconds; OCCM's defaults
    monitor_timeout: int = 3
    monitor_max_retries: int = 1
    monitor_max_retries_down: int = 3


# INI key -> (LBOptions field, kind). kinds: str, bool, seconds, int, method
KEYS: dict[str, tuple[str, str]] = {
    "enabled": ("enabled", "bool"),
    "subnet-id": ("subnet_id", "str"),
    "network-id": ("network_id", "str"),
    "member-subnet-id": ("member_subnet_id", "str"),
    "floating-network-id": ("floating_network_id", "str"),
    "lb-method": ("lb_method", "method"),
    "lb-provider": ("lb_provider", "str"),
    "flavor-id": ("flavor_id", "str"),
    "availability-zone": ("availability_zone", "str"),
    "internal-lb": ("internal_lb", "bool"),
    "create-monitor": ("create_monitor", "bool"),
    "manage-security-groups": ("manage_security_groups", "bool"),
    "monitor-delay": ("monitor_delay", "seconds"),
    "monitor-timeout": ("monitor_timeout", "seconds"),
    "monitor-max-retries": ("monitor_max_retries", "int"),
    "monitor-max-retries-down": ("monitor_max_retries_down", "int"),
}

# OCCM keys with no effect here; named in the warning so nobody believes they apply.
UNSUPPORTED_KEYS = frozenset({
    "use-octavia", "lb-version", "floating-subnet-id", "floating-subnet", "floating-subnet-tags",
    "cascade-delete", "enable-ingress-hostname", "ingress-hostname-suffix",
    "max-shared-lb", "container-store", "provider-requires-serial-api-calls", "tls-container-ref",
    "default-tls-container-ref", "node-security-group", "internal-lb-subnet",
})
# Accepted and ignored: what it selects is always true here.
NOOP_KEYS = frozenset({"use-octavia"})


@dataclass
class LoadBalancerConfig:
    """``[LoadBalancer]`` plus ``[LoadBalancer "REGION"]`` overrides."""

    # LBOptions fields by name, values already parsed to each field's type.
    default: dict[str, Any] = field(default_factory=dict)
    regions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def options_for(self, region: str) -> LBOptions:
        return dataclasses.replace(LBOptions(), **{**self.default, **self.regions.get(region, {})})


def parse_value(kind: str, value: str | None) -> object:
    """One typed value; raises ValueError with a short reason."""
    if kind == "bool":
        return parse_bool(value)
    if value is None:
        raise ValueError("blank value not supported")
    if kind == "seconds":
        # OCCM takes Go durations ("5s", "1m"); Octavia takes whole seconds.
        seconds = parse_duration(value)
        if seconds < 0 or seconds != int(seconds):
            raise ValueError(f"{value!r} is not a whole, non-negative number of seconds")
        return int(seconds)
    if kind == "int":
        return int(value)
    if kind == "method":
        method = value.upper()
        if method not in LB_METHODS:
            raise ValueError(f"unknown lb-method {value!r} (one of {', '.join(LB_METHODS)})")
        return method
    return value


def set_option(config: LoadBalancerConfig, subsection: str | None, name: str, value: str | None) -> str | None:
    """Apply one ``[LoadBalancer]`` statement; return a warning, if any.

    Raises ValueError for a bad value of a supported key (fatal, as gcfg).
    """
    if name in NOOP_KEYS:
        return None
    if name in UNSUPPORTED_KEYS:
        return f"[LoadBalancer] {name} is not supported by isthmus-ccm and is ignored"
    if name not in KEYS:
        return f"ignoring unknown key {name!r} in section [LoadBalancer]"
    attr, kind = KEYS[name]
    target = config.default if subsection is None else config.regions.setdefault(subsection, {})
    target[attr] = parse_value(kind, value)
    return None


def describe(options: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(options.items()))
