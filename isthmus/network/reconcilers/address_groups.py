"""Pure planning of remote-group membership across regions (no I/O).

A region only sees its own ports as members of a security group: the ports
bound there, and the shadows there of ports bound elsewhere, which carry their
port's groups (plans.shadow_security). A member with no shadow in X (its
network does not reach X, or reaches it without shadows: VLAN, ML2/OVN) is
admitted otherwise: in each region X, for each group S that a rule of a group
copied in X names as ``remote_group_id``, Isthmus keeps one Neutron *address
group* ``isthmus-members-<S>`` (owned by S's project) holding the addresses
(/32, /128) of those of S's members, and each such rule gets one *companion*
rule in X: the same rule with ``remote_address_group_id`` instead of
``remote_group_id``. The original rule stays (it admits the members X counts).
A membership change is an address added to or removed from address groups; no
rule changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from isthmus.network import bound_region
from isthmus.network.members import addresses_of, cidr, is_member

NAME_PREFIX = "isthmus-members-"
# Description of the companion rule of a remote-group rule (central never has it).
COMPANION_TAG = "isthmus:members-elsewhere-of:"
# Description of the /32 rules the previous release expanded remote members into.
LEGACY_MEMBER_TAG = "isthmus:member-of:"


def name_of(group_id: str) -> str:
    return f"{NAME_PREFIX}{group_id}"


def group_of(name: str | None) -> str | None:
    """The security group an Isthmus address group stands for (None: not ours)."""
    if name and name.startswith(NAME_PREFIX):
        return name[len(NAME_PREFIX):] or None
    return None


def body(group: Mapping[str, Any], addresses: Iterable[str] = ()) -> dict[str, Any]:
    """A new address group for central group ``group`` (created as its owner's)."""
    return {"name": name_of(group["id"]), "project_id": group["project_id"],
            "description": f"Isthmus: members of security group {group['id']} bound in other regions",
            "addresses": sorted(addresses)}


# Whether a region holds a shadow of a port in the port's groups (ShadowReach.carries).
Carried = Callable[[Mapping[str, Any], str], bool]


def desired_addresses(group_id: str, region: str, ports: Iterable[Mapping[str, Any]],
                      carried: Carried = lambda port, region: False) -> set[str]:
    """What ``isthmus-members-<group>`` holds in ``region``: the addresses of the
    group's members bound in any other region and not shadowed in the group here."""
    out: set[str] = set()
    for port in ports:
        if is_member(port, group_id) and bound_region(port) != region and not carried(port, region):
            out |= addresses_of(port)
    return out


@dataclass
class AddressDiff:
    add: list[str] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.add or self.remove)


def diff(want: Iterable[str], have: Iterable[str]) -> AddressDiff:
    """One add_addresses and one remove_addresses call make ``have`` ``want``."""
    want_set, have_set = {cidr(a) for a in want}, {cidr(a) for a in have}
    return AddressDiff(add=sorted(want_set - have_set), remove=sorted(have_set - want_set))


def remote_groups(rules: Iterable[Mapping[str, Any]]) -> set[str]:
    return {r["remote_group_id"] for r in rules if r.get("remote_group_id")}


def companion_rule(rule: Mapping[str, Any], address_group_id: str) -> dict[str, Any]:
    """The rule admitting the remote group's members bound in other regions."""
    companion = dict(rule)
    companion.pop("id", None)
    companion.update({"remote_group_id": None, "remote_address_group_id": address_group_id,
                      "remote_ip_prefix": None, "description": f"{COMPANION_TAG}{rule['remote_group_id']}"})
    return companion


def companion_rules(rules: Iterable[Mapping[str, Any]], address_groups: Mapping[str, str]) -> list[dict[str, Any]]:
    """One companion per remote-group rule whose group has an address group here
    (``address_groups``: remote group id -> address group id in the region)."""
    return [companion_rule(r, address_groups[r["remote_group_id"]]) for r in rules
            if r.get("remote_group_id") and r["remote_group_id"] in address_groups]


def is_legacy_member_rule(rule: Mapping[str, Any]) -> bool:
    """A /32 rule of the previous release (one per remote member): never desired."""
    return (rule.get("description") or "").startswith(LEGACY_MEMBER_TAG)


def choose(found: Iterable[Mapping[str, Any]],
           group: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Among the address groups named for ``group``: the one to use and the
    duplicates (two workers that raced to create it). Only the group owner's
    project counts: anyone may name an address group like ours in their own
    project, and its addresses must never reach the group's rules."""
    ours = sorted((dict(ag) for ag in found
                   if ag.get("name") == name_of(group["id"]) and ag.get("project_id") == group["project_id"]),
                  key=lambda ag: ag["id"])
    return (ours[0] if ours else None), ours[1:]


def rules_key(group: Mapping[str, Any]) -> frozenset[str]:
    """A group's rules as wiring sees them: Neutron's rules are immutable (a
    change is a delete and a create), so their ids say when they changed."""
    return frozenset(r["id"] for r in group.get("security_group_rules") or [])


class KnownAddressGroups:
    """What one worker process learnt of the regions' address groups, so that a
    membership event writes without reading first: each group's address group id
    per region, and the rules each region's copy of a group was last wired for.

    A hint, never proof: a stale id answers 404 (or 400 for an address already
    there) and the caller reads and converges instead; a copy changed by hand
    since it was wired is repaired by ``security_group_sync``, the periodic
    backstop, which reads everything and never consults this.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[tuple[str, str], str] = {}
        self._wired: dict[tuple[str, str], frozenset[str]] = {}

    def id_of(self, region: str, group_id: str) -> str | None:
        with self._lock:
            return self._ids.get((region, group_id))

    def remember(self, region: str, group_id: str, address_group_id: str) -> None:
        with self._lock:
            self._ids[(region, group_id)] = address_group_id

    def forget(self, region: str, group_id: str) -> None:
        with self._lock:
            self._ids.pop((region, group_id), None)

    def is_wired(self, region: str, group: Mapping[str, Any]) -> bool:
        with self._lock:
            return self._wired.get((region, group["id"])) == rules_key(group)

    def wired(self, region: str, group: Mapping[str, Any]) -> None:
        with self._lock:
            self._wired[(region, group["id"])] = rules_key(group)
