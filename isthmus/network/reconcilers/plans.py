"""Pure planning for the reconcilers: given what central says and what a region
has, what to create, change and delete there. No I/O, so unit-tested directly."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from isthmus.network import (
    PROFILE_KEY,
    SHADOW_OWNER,
    bound_region,
    reported_agent,
    shadow_port_id,
    shadow_port_name,
)
from isthmus.network.copies import rule_body, rule_key
from isthmus.network.reconcilers import address_groups as address_groups_plan

NETWORK_FIELDS = ("name", "description", "admin_state_up", "shared")
SUBNET_FIELDS = ("name", "description", "enable_dhcp", "dns_nameservers", "host_routes")
MEMBER_RULE_TAG = address_groups_plan.LEGACY_MEMBER_TAG  # the previous release's /32 member rules


ROUTER_INTERFACE_OWNER = "network:router_interface"


def changed_within(port: Mapping[str, Any], window: timedelta, now: datetime | None = None) -> bool:
    """Whether Neutron's ``updated_at`` of the object is less than ``window`` ago
    (False without one)."""
    stamp = port.get("updated_at")
    if not stamp:
        return False
    changed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if changed.tzinfo is None:
        changed = changed.replace(tzinfo=UTC)
    return (now or datetime.now(UTC)) - changed <= window


def is_compute(port: Mapping[str, Any]) -> bool:
    owner = port.get("device_owner") or ""
    return owner.startswith("compute:") and owner != SHADOW_OWNER


def is_shadow(port: Mapping[str, Any]) -> bool:
    return port.get("device_owner") == SHADOW_OWNER


@dataclass
class PortPlan:
    delete: list[str] = field(default_factory=list)
    create_shadows: list[dict[str, Any]] = field(default_factory=list)


def has_local_members(regional_ports: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a region has servers or router interfaces bound on a network: then it
    needs a shadow of every port of that network bound elsewhere."""
    return any((is_compute(p) or p.get("device_owner") == ROUTER_INTERFACE_OWNER) and p.get("binding:host_id")
               for p in regional_ports)


def missing_at_central(central_ports: list[dict[str, Any]], regional_ports: list[dict[str, Any]]) -> set[str]:
    """Regional user ports and shadows whose central port is not in central's list:
    the ids to check against the tombstones before anything is deleted."""
    central_ids = {p["id"] for p in central_ports}
    return {p["id"] for p in regional_ports
            if p["id"] not in central_ids and not (p.get("device_owner") or "").startswith("network:")}


def plan_ports(region: str, central_ports: list[dict[str, Any]], regional_ports: list[dict[str, Any]],
               shadows: bool = True, deleted: Collection[str] = (), left: Collection[str] = ()) -> PortPlan:
    """Regional ports of one network against central's: :func:`plan_port` for
    every port either side has (the periodic full pass; events plan one port).
    ``left``: ports planned by their own run, neither deleted nor shadowed here;
    a server's port among them still makes the region want the network's shadows."""
    central_by_id = {p["id"]: p for p in central_ports}
    regional_by_id: dict[str, list[dict[str, Any]]] = {}
    for port in regional_ports:
        regional_by_id.setdefault(port["id"], []).append(port)
    plan = PortPlan()
    for port_id, copies in regional_by_id.items():
        if port_id in left:
            continue
        plan.delete += plan_port(region, central_by_id.get(port_id), copies, shadows=shadows,
                                 local_members=False, deleted=port_id in deleted).delete
    # A bound router interface needs the network's remote ports as much as a
    # server does: a router half's transit port reaches the other halves, and a
    # half delivers to servers of its subnets in other regions.
    local_members = has_local_members(p for p in regional_ports if p["id"] not in plan.delete)
    for port in central_ports:
        if port["id"] in left:
            continue
        kept = [c for c in regional_by_id.get(port["id"], []) if c["id"] not in plan.delete]
        plan.create_shadows += plan_port(region, port, kept, shadows=shadows, local_members=local_members,
                                         deleted=False, decided=True).create_shadows
    return plan


def plan_port(region: str, original: Mapping[str, Any] | None, copies: list[dict[str, Any]], *, shadows: bool,
              local_members: bool, deleted: bool, decided: bool = False) -> PortPlan:
    """One port in one region: ``copies`` are the region's ports with its id (a
    copy or a shadow; usually none or one), ``original`` central's port (None if
    central lacks it; ``deleted`` when central recorded deleting it).

    * a user port (compute or unbound) central deleted: delete its copy;
    * a shadow whose original central deleted, or that moved here or was unbound,
      or went stale (MAC, IPs, host or agent changed): delete it (every shadow
      when ``shadows`` is off: noop mode or a non-VxLAN network);
    * an unbound stale copy of a port now bound in another region: delete it
      (the port moved; a shadow replaces it);
    * a port bound in another region gets a shadow here if this region has
      ports of its own on the network (``local_members``: shadows serve L2
      between VMs). ``decided``: ``copies`` are already what stays.

    A port merely missing from central (no ``deleted``) is kept: only central's
    recorded delete is proof."""
    plan = PortPlan()
    for port in [] if decided else copies:
        owner = port.get("device_owner") or ""
        if is_shadow(port):
            if original is None:
                if deleted or not shadows:
                    plan.delete.append(port["id"])
            elif not shadows or bound_region(original) in (None, region) or shadow_is_stale(port, original):
                plan.delete.append(port["id"])
        elif owner.startswith("network:"):
            continue
        elif original is None:
            # Not only compute ports: Nova leaves a port it did not create unbound
            # (device_owner "") when its server goes; that copy kept the port's
            # security groups in use here, so Neutron refused to delete them.
            if deleted:
                plan.delete.append(port["id"])
        elif not port.get("binding:host_id") and bound_region(original) not in (None, region):
            plan.delete.append(port["id"])
    kept = [c for c in copies if c["id"] not in plan.delete]
    if (shadows and local_members and original is not None and is_compute(original)
            and bound_region(original) not in (None, region) and not kept):
        plan.create_shadows.append(shadow_body(original))
    return plan


def shadow_is_stale(shadow: Mapping[str, Any], original: Mapping[str, Any]) -> bool:
    return (shadow.get("mac_address") != original.get("mac_address")
            or _ips(shadow) != _ips(original)
            or shadow.get("binding:host_id") != original.get("binding:host_id")
            or reported_agent(shadow) != reported_agent(original))


def _ips(port: Mapping[str, Any]) -> set[str]:
    return {ip["ip_address"] for ip in port.get("fixed_ips") or []}


def shadow_body(port: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a port bound in another region: same UUID (from its name, see
    the local plugin), MAC and IPs, bound to the remote host, in the port's
    security groups (:func:`shadow_security`).
    The remote host's L2 agent (type, tunnel IP), when its region reported one,
    rides in the binding profile: the local plugin makes a shadow agent of it."""
    body = {
        "name": shadow_port_name(port["id"]),
        "network_id": port["network_id"],
        "project_id": port["project_id"],
        "mac_address": port["mac_address"],
        "fixed_ips": [{"subnet_id": ip["subnet_id"], "ip_address": ip["ip_address"]} for ip in port["fixed_ips"]],
        "device_owner": SHADOW_OWNER,
        "device_id": port.get("device_id") or "",
        "binding:host_id": port.get("binding:host_id") or "",
        **shadow_security(port),
    }
    agent = reported_agent(port)
    if agent:
        body["binding:profile"] = {PROFILE_KEY: {"region": bound_region(port), "agent": agent}}
    return body


def shadow_security(port: Mapping[str, Any]) -> dict[str, Any]:
    """A shadow holds its port's security groups: the region then counts the
    port as a member of them, as it counts its own ports, and its remote-group
    rules admit it with no address group and no request per member (see
    address_groups). Nothing enforces anything on a shadow (no agent serves its
    host), so port security only makes the groups possible; none without groups."""
    groups = sorted(port.get("security_groups") or []) if port.get("port_security_enabled", True) else []
    return {"port_security_enabled": bool(groups), "security_groups": groups}


def shadow_security_changes(shadow: Mapping[str, Any], port: Mapping[str, Any]) -> dict[str, Any]:
    """The update that gives a shadow its port's groups now (none: in step).
    Groups change in place: a remake would break the L2 it carries."""
    want = shadow_security(port)
    have = {"port_security_enabled": bool(shadow.get("port_security_enabled")),
            "security_groups": sorted(shadow.get("security_groups") or [])}
    return {} if want == have else want


def shadow_of(port: Mapping[str, Any]) -> str | None:
    return shadow_port_id(port.get("name"))


# --------------------------------------------------------------------- security groups
@dataclass
class RulePlan:
    delete: list[str] = field(default_factory=list)
    create: list[dict[str, Any]] = field(default_factory=list)


def desired_rules(group: Mapping[str, Any], address_groups: Mapping[str, str]) -> list[dict[str, Any]]:
    """Central's rules, plus one companion rule per remote-group rule admitting
    the remote group's members bound in other regions (``address_groups``:
    remote group id -> its address group in the region, see address_groups).

    A central rule naming a central address group is not copied: central's
    address groups have no regional copies (fail closed, never a 404 loop)."""
    rules = [r for r in group.get("security_group_rules") or [] if not r.get("remote_address_group_id")]
    return rules + address_groups_plan.companion_rules(rules, address_groups)


def plan_rules(group_id: str, desired: list[dict[str, Any]], existing: list[dict[str, Any]]) -> RulePlan:
    """Rules to delete and to create so a copy holds ``desired``. A twin of a
    wanted rule (two wirings that raced both made it) is kept, not deleted: ML2/OVN
    deletes a rule's ACL by its match, which removes the twin's ACL too, and the
    traffic the remaining rule admits is then dropped (seen across OVN regions)."""
    plan = RulePlan()
    want = {rule_key(r): r for r in desired}
    have = set()
    for rule in existing:
        key = rule_key(rule)
        if key in want:
            have.add(key)
        else:
            plan.delete.append(rule["id"])
    plan.create = [rule_body(r, group_id) for key, r in want.items() if key not in have]
    return plan
