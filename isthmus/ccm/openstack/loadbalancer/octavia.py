"""One region's Octavia and floating IPs: records, the openstacksdk client, and convergence.

:class:`RegionReconciler` converges one region incrementally: it reads the
load balancer tree, then creates what is missing, updates what changed and
deletes what is extra, waiting after every change for the load balancer to
leave ``PENDING_*`` (Octavia refuses changes meanwhile) within a bounded
time; past it :class:`Pending` asks for a retry later. Every read error is a
:class:`RegionError` raised before anything is deleted, so an unreachable
region never loses a load balancer. Only load balancers whose description
carries the Service's UID are touched (:func:`plan.is_ours`).
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from isthmus.ccm.errors import CCMError, RegionError
from isthmus.ccm.openstack.clients import RegionBreaker, RegionCache, get_or_none, region_errors, sdk_connection
from isthmus.ccm.openstack.loadbalancer.plan import (
    DesiredLB,
    Listener,
    Member,
    Monitor,
    is_ours,
    ownership_marker,
    security_group_name,
)
from isthmus.ccm.openstack.loadbalancer.secgroups import (
    GroupRecord,
    PortRecord,
    Rule,
    RuleRecord,
    SecurityGroupAPI,
    Subnet,
    ensure_security_group,
    remove_security_groups,
)

LOG = logging.getLogger(__name__)

SERVICES = ("load-balancer", "network")


class LBError(CCMError):
    """A load balancer cannot be converged (ERROR state, name conflict...)."""

    def __init__(self, region: str, message: str) -> None:
        super().__init__(f"region {region}: {message}")
        self.region = region


class Pending(LBError):
    """Still PENDING_* after the bounded wait: retry later."""


class NoOctavia(RegionError):
    """The region has no load-balancer endpoint in the catalog: it can hold no load balancer."""


# --- records ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class LBRecord:
    id: str
    name: str
    description: str
    provisioning_status: str
    vip_address: str = ""
    vip_port_id: str = ""
    listener_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ListenerRecord:
    id: str
    name: str
    protocol: str
    port: int
    default_pool_id: str = ""
    connection_limit: int = -1
    allowed_cidrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class PoolRecord:
    id: str
    name: str
    protocol: str
    lb_algorithm: str
    healthmonitor_id: str = ""


@dataclass(frozen=True)
class MemberRecord:
    id: str
    name: str
    address: str
    port: int
    monitor_port: int = 0


@dataclass(frozen=True)
class MonitorRecord:
    id: str
    type: str
    delay: int
    timeout: int
    max_retries: int
    max_retries_down: int
    url_path: str = ""

    def as_monitor(self) -> Monitor:
        return Monitor(self.type, self.delay, self.timeout, self.max_retries, self.max_retries_down, self.url_path)


@dataclass(frozen=True)
class FloatingIP:
    id: str
    address: str
    port_id: str
    description: str


class OctaviaAPI(SecurityGroupAPI, Protocol):
    """What the reconciler needs from one region (fakeable)."""

    region: str

    def find_load_balancers(self, name: str) -> list[LBRecord]: ...
    def get_load_balancer(self, lb_id: str) -> LBRecord | None: ...
    def create_load_balancer(self, desired: DesiredLB) -> LBRecord: ...
    def delete_load_balancer(self, lb_id: str) -> None: ...
    def get_listener(self, listener_id: str) -> ListenerRecord | None: ...
    def create_listener(self, lb_id: str, listener: Listener) -> ListenerRecord: ...
    def update_listener(self, listener_id: str, connection_limit: int, allowed_cidrs: tuple[str, ...]) -> None: ...
    def delete_listener(self, listener_id: str) -> None: ...
    def get_pool(self, pool_id: str) -> PoolRecord | None: ...
    def create_pool(self, listener_id: str, listener: Listener) -> PoolRecord: ...
    def update_pool(self, pool_id: str, lb_method: str) -> None: ...
    def delete_pool(self, pool_id: str) -> None: ...
    def members(self, pool_id: str) -> list[MemberRecord]: ...
    def replace_members(self, pool_id: str, members: tuple[Member, ...], subnet_id: str) -> None: ...
    def get_monitor(self, monitor_id: str) -> MonitorRecord | None: ...
    def create_monitor(self, pool_id: str, name: str, monitor: Monitor) -> None: ...
    def update_monitor(self, monitor_id: str, monitor: Monitor) -> None: ...
    def delete_monitor(self, monitor_id: str) -> None: ...
    def floating_ips_on_port(self, port_id: str) -> list[FloatingIP]: ...
    def find_floating_ip(self, address: str) -> FloatingIP | None: ...
    def floating_ips_described(self, description: str) -> list[FloatingIP]: ...
    def create_floating_ip(self, network_id: str, port_id: str, description: str) -> FloatingIP: ...
    def set_floating_ip_port(self, fip_id: str, port_id: str | None) -> None: ...
    def delete_floating_ip(self, fip_id: str) -> None: ...


def _http(monitor: Monitor) -> dict[str, str]:
    """An HTTP monitor's request (externalTrafficPolicy: Local): GET the path, 200 is up."""
    if monitor.type != "HTTP":
        return {}
    return {"http_method": "GET", "url_path": monitor.url_path, "expected_codes": "200"}


def _cidrs(raw: Any) -> tuple[str, ...]:
    """Octavia's ``allowed_cidrs`` (None or a list) as the plan writes them."""
    return tuple(sorted(str(ipaddress.ip_network(c, strict=False)) for c in raw or ()))


# --- floating IP decisions (pure) ------------------------------------------------------------

def fip_description(uid: str, service_key: str) -> str:
    return f"{ownership_marker(uid)} service={service_key}"


@dataclass(frozen=True)
class FipAction:
    """``kind``: none, use (already on the VIP), associate (an existing one), create,
    release (ours, no longer wanted: delete), detach (not ours, or kept: disassociate)."""

    kind: str
    fip: FloatingIP | None = None
    problem: str = ""


def decide_fip(desired: DesiredLB, attached: list[FloatingIP], requested: FloatingIP | None,
               vip_port_id: str, uid: str, kept: list[FloatingIP] | None = None) -> list[FipAction]:
    """What to do with floating IPs on the VIP port when ensuring a load balancer;
    ``kept``: ours, detached, from when the Service left this region."""
    kept = [f for f in kept or () if not f.port_id and is_ours(f.description, uid)]
    if not desired.floating_network_id:
        # Internal, or no floating network: a floating IP we made goes; others are left alone.
        return [FipAction("release" if is_ours(f.description, uid) and not desired.keep_floatingip
                          else "none", f) for f in attached]
    if attached:
        first = attached[0]
        if desired.floating_ip and first.address != desired.floating_ip:
            return [FipAction("use", first, problem=f"floating IP {first.address} is on the VIP, not the requested "
                                                    f"{desired.floating_ip}: delete the Service to change it")]
        return [FipAction("use", first)]
    if kept and not desired.floating_ip:
        # Ours, kept detached when the Service left this region: the same address again.
        return [FipAction("associate", kept[0])]
    if desired.floating_ip:
        if requested is None:
            return [FipAction("none", problem=f"requested floating IP {desired.floating_ip} does not exist")]
        if requested.port_id and requested.port_id != vip_port_id:
            return [FipAction("none", requested, problem=f"requested floating IP {desired.floating_ip} is in use "
                                                         f"by port {requested.port_id}")]
        return [FipAction("associate", requested)]
    return [FipAction("create")]


def decide_fip_on_delete(attached: list[FloatingIP], uid: str, keep: bool) -> list[FipAction]:
    """On Service deletion: delete the floating IPs we made (unless kept); detach the rest.
    When the Service only leaves the region, ``keep`` is true: ours are detached and
    kept, so the address is the Service's as long as the Service exists."""
    return [FipAction("release" if is_ours(f.description, uid) and not keep else "detach", f) for f in attached]


# --- convergence -----------------------------------------------------------------------------

@dataclass
class EnsureResult:
    lb_id: str
    vip_address: str
    floating_ip: str
    changes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return self.floating_ip or self.vip_address


class RegionReconciler:
    def __init__(self, api: OctaviaAPI, timeout: float = 60.0, interval: float = 1.0,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.region = api.region
        self.timeout = timeout
        self.interval = interval
        self.sleep = sleep
        self.clock = clock

    def wait_active(self, lb_id: str) -> LBRecord:
        deadline = self.clock() + self.timeout
        while True:
            lb = self.api.get_load_balancer(lb_id)
            if lb is None:
                raise LBError(self.region, f"load balancer {lb_id} disappeared")
            if lb.provisioning_status == "ERROR":
                raise LBError(self.region, f"load balancer {lb.name} ({lb_id}) is in ERROR")
            if not lb.provisioning_status.startswith("PENDING_"):
                return lb
            if self.clock() >= deadline:
                raise Pending(self.region, f"load balancer {lb.name} still {lb.provisioning_status} "
                                           f"after {self.timeout:.0f}s: retrying later")
            self.sleep(self.interval)

    def find_ours(self, name: str, uid: str) -> list[LBRecord]:
        return [lb for lb in self.api.find_load_balancers(name) if is_ours(lb.description, uid)]

    def ensure(self, desired: DesiredLB, uid: str, service_key: str) -> EnsureResult:
        found = self.api.find_load_balancers(desired.name)
        ours = [lb for lb in found if is_ours(lb.description, uid)]
        changes: list[str] = []
        if not ours:
            if found:
                raise LBError(self.region, f"a load balancer named {desired.name} exists that isthmus-ccm did not "
                                           f"create for this Service (description {found[0].description!r}): "
                                           "left alone")
            lb = self.api.create_load_balancer(desired)
            changes.append(f"created load balancer {lb.id}")
        else:
            lb = ours[0]
        lb = self.wait_active(lb.id)
        self._ensure_listeners(lb, desired, changes)
        lb = self.wait_active(lb.id)
        result = EnsureResult(lb.id, lb.vip_address, "", changes)
        self._ensure_fip(lb, desired, uid, service_key, result)
        if desired.security_group is not None:
            done, problems = ensure_security_group(self.api, desired.security_group, uid)
            result.changes += done
            result.problems += problems
        elif not desired.keep_security_group:  # turned off (or never on): a group of ours from before goes
            result.changes += remove_security_groups(self.api, security_group_name(desired.name), uid)
        return result

    def _changed(self, lb_id: str, changes: list[str], what: str) -> None:
        changes.append(what)
        self.wait_active(lb_id)

    def _ensure_listeners(self, lb: LBRecord, desired: DesiredLB, changes: list[str]) -> None:
        current: dict[tuple[str, int], ListenerRecord] = {}
        for listener_id in lb.listener_ids:
            rec = self.api.get_listener(listener_id)
            if rec is not None:
                current[(rec.protocol, rec.port)] = rec
        wanted = {lst.key: lst for lst in desired.listeners}
        for key, rec in current.items():
            if key not in wanted:
                if rec.default_pool_id:
                    self.api.delete_pool(rec.default_pool_id)  # Octavia deletes its members and monitor
                    self._changed(lb.id, changes, f"deleted pool of {key[0]}/{key[1]}")
                self.api.delete_listener(rec.id)
                self._changed(lb.id, changes, f"deleted listener {key[0]}/{key[1]}")
        for key, listener in wanted.items():
            rec = current.get(key)
            if rec is None:
                rec = self.api.create_listener(lb.id, listener)
                self._changed(lb.id, changes, f"created listener {key[0]}/{key[1]}")
            elif (rec.connection_limit, rec.allowed_cidrs) != (listener.connection_limit, listener.allowed_cidrs):
                rec = self._update_listener(lb, rec, listener, changes)
            if rec.allowed_cidrs != listener.allowed_cidrs:
                # This Octavia ignored the source ranges: never expose the Service
                # wider than asked; its listener goes until the ranges can be kept.
                self.api.delete_listener(rec.id)
                raise LBError(self.region, f"listener {key[0]}/{key[1]}: this Octavia does not restrict "
                                           f"sources (allowed_cidrs); not exposed here")
            self._ensure_pool(lb, rec, listener, desired.member_subnet_id, changes)

    def _update_listener(self, lb: LBRecord, rec: ListenerRecord, listener: Listener,
                         changes: list[str]) -> ListenerRecord:
        """Update, then read back what Octavia kept (it may ignore ``allowed_cidrs``)."""
        try:
            self.api.update_listener(rec.id, listener.connection_limit, listener.allowed_cidrs)
        except LBError:
            if listener.allowed_cidrs != rec.allowed_cidrs:
                self.api.delete_listener(rec.id)  # not restricted as asked: not exposed at all
                self._changed(lb.id, changes, f"deleted listener {rec.protocol}/{rec.port}: sources not restricted")
            raise
        self._changed(lb.id, changes, f"updated listener {rec.protocol}/{rec.port}")
        return self.api.get_listener(rec.id) or rec

    def _ensure_pool(self, lb: LBRecord, listener_rec: ListenerRecord, listener: Listener, subnet_id: str,
                     changes: list[str]) -> None:
        pool = self.api.get_pool(listener_rec.default_pool_id) if listener_rec.default_pool_id else None
        if pool is not None and pool.protocol != listener.pool_protocol:
            # A pool's protocol cannot change (proxy-protocol toggled): replace the pool.
            self.api.delete_pool(pool.id)
            self._changed(lb.id, changes, f"deleted {pool.protocol} pool {pool.name}")
            pool = None
        if pool is None:
            pool = self.api.create_pool(listener_rec.id, listener)
            self._changed(lb.id, changes, f"created pool {listener.pool_name}")
        elif pool.lb_algorithm != listener.lb_method:
            self.api.update_pool(pool.id, listener.lb_method)
            self._changed(lb.id, changes, f"updated pool {listener.pool_name} to {listener.lb_method}")
        self._ensure_members(lb, pool, listener, subnet_id, changes)
        self._ensure_monitor(lb, pool, listener, changes)

    def _ensure_members(self, lb: LBRecord, pool: PoolRecord, listener: Listener, subnet_id: str,
                        changes: list[str]) -> None:
        current = {(mem.address, mem.port): mem for mem in self.api.members(pool.id)}
        wanted = {(mem.address, mem.port): mem for mem in listener.members}
        if current.keys() == wanted.keys() and all(
                current[k].monitor_port == wanted[k].monitor_port for k in wanted):
            return
        # One batch update (Octavia keeps matching members, adds and removes the rest):
        # one PENDING_UPDATE per pool, not one per node, which matters with thousands of nodes.
        self.api.replace_members(pool.id, listener.members, subnet_id)
        added = sorted(f"{m.name} {m.address}:{m.port}" for k, m in wanted.items() if k not in current)
        removed = sorted(f"{m.name or m.address}:{m.port}" for k, m in current.items() if k not in wanted)
        self._changed(lb.id, changes, f"members of {listener.pool_name}: "
                                      f"added [{', '.join(added)}], removed [{', '.join(removed)}]")

    def _ensure_monitor(self, lb: LBRecord, pool: PoolRecord, listener: Listener, changes: list[str]) -> None:
        rec = self.api.get_monitor(pool.healthmonitor_id) if pool.healthmonitor_id else None
        want = listener.monitor
        if rec is not None and (want is None or rec.type != want.type):
            self.api.delete_monitor(rec.id)
            self._changed(lb.id, changes, f"deleted health monitor of {listener.pool_name}")
            rec = None
        if want is None:
            return
        if rec is None:
            self.api.create_monitor(pool.id, listener.monitor_name, want)
            self._changed(lb.id, changes, f"created health monitor of {listener.pool_name}")
        elif rec.as_monitor() != want:
            self.api.update_monitor(rec.id, want)
            self._changed(lb.id, changes, f"updated health monitor of {listener.pool_name}")

    def _ensure_fip(self, lb: LBRecord, desired: DesiredLB, uid: str, service_key: str,
                    result: EnsureResult) -> None:
        if not lb.vip_port_id:
            return
        attached = self.api.floating_ips_on_port(lb.vip_port_id)
        requested, kept = None, []
        if desired.floating_network_id and not attached:
            if desired.floating_ip:
                requested = self.api.find_floating_ip(desired.floating_ip)
            else:
                kept = self.api.floating_ips_described(fip_description(uid, service_key))
        for action in decide_fip(desired, attached, requested, lb.vip_port_id, uid, kept):
            if action.problem:
                result.problems.append(f"region {self.region}: {action.problem}")
            if action.kind == "use" and action.fip is not None:
                result.floating_ip = action.fip.address
            elif action.kind == "associate" and action.fip is not None:
                self.api.set_floating_ip_port(action.fip.id, lb.vip_port_id)
                result.floating_ip = action.fip.address
                result.changes.append(f"associated floating IP {action.fip.address}")
            elif action.kind == "create":
                fip = self.api.create_floating_ip(desired.floating_network_id, lb.vip_port_id,
                                                  fip_description(uid, service_key))
                result.floating_ip = fip.address
                result.changes.append(f"allocated floating IP {fip.address}")
            elif action.kind == "release" and action.fip is not None:
                self.api.delete_floating_ip(action.fip.id)
                result.changes.append(f"released floating IP {action.fip.address}")

    def delete(self, name: str, uid: str, keep_floatingip: bool, service_key: str | None = None) -> list[str]:
        """Delete our load balancers named ``name`` (cascade). With ``service_key``
        (the Service is deleted) our floating IPs are released, those kept detached
        earlier too; without it (the Service only left this region) they are
        detached and kept, reused if it comes back.

        Returns what was done; raises Pending while a deletion is still in
        progress, so the caller keeps the finalizer until the region is clean.
        """
        done: list[str] = []
        keep_floatingip = keep_floatingip or service_key is None
        if service_key is not None and not keep_floatingip:
            for fip in self.api.floating_ips_described(fip_description(uid, service_key)):
                if not fip.port_id and is_ours(fip.description, uid):
                    self.api.delete_floating_ip(fip.id)
                    done.append(f"released floating IP {fip.address}")
        for lb in self.find_ours(name, uid):
            if lb.provisioning_status != "PENDING_DELETE":
                if lb.provisioning_status.startswith("PENDING_"):
                    lb = self.wait_active(lb.id)
                if lb.vip_port_id:
                    for action in decide_fip_on_delete(self.api.floating_ips_on_port(lb.vip_port_id), uid,
                                                       keep_floatingip):
                        assert action.fip is not None
                        if action.kind == "release":
                            self.api.delete_floating_ip(action.fip.id)
                            done.append(f"released floating IP {action.fip.address}")
                        else:
                            self.api.set_floating_ip_port(action.fip.id, None)
                            done.append(f"detached floating IP {action.fip.address}")
                self.api.delete_load_balancer(lb.id)
                done.append(f"deleted load balancer {lb.id}")
            self._wait_gone(lb.id)
        done += remove_security_groups(self.api, security_group_name(name), uid)
        return done

    def _wait_gone(self, lb_id: str) -> None:
        deadline = self.clock() + self.timeout
        while True:
            lb = self.api.get_load_balancer(lb_id)
            if lb is None or lb.provisioning_status == "DELETED":
                return
            if self.clock() >= deadline:
                raise Pending(self.region, f"load balancer {lb_id} still {lb.provisioning_status} "
                                           f"after {self.timeout:.0f}s: retrying later")
            self.sleep(self.interval)


# --- openstacksdk ----------------------------------------------------------------------------

def _ids(items: Any) -> tuple[str, ...]:
    return tuple(str(i["id"]) for i in items or () if isinstance(i, dict) and i.get("id"))


def _lb(raw: Any) -> LBRecord:
    return LBRecord(id=raw.id, name=raw.name or "", description=raw.description or "",
                    provisioning_status=raw.provisioning_status or "", vip_address=raw.vip_address or "",
                    vip_port_id=raw.vip_port_id or "", listener_ids=_ids(raw.listeners))


def _group(raw: Any) -> GroupRecord:
    return GroupRecord(raw.id, raw.name or "", raw.description or "",
                       tuple(_rule(r) for r in raw.security_group_rules or ()))


def _rule(raw: dict[str, Any]) -> RuleRecord:
    """A rule of ours is one port, one protocol, from a prefix; anything else is not.
    ``raw``: an entry of a group's ``security_group_rules`` (openstacksdk keeps them as dicts)."""
    low, high = raw.get("port_range_min"), raw.get("port_range_max")
    ours = (low is not None and low == high and raw.get("protocol") and raw.get("remote_ip_prefix")
            and not raw.get("remote_group_id"))
    rule = Rule(str(raw["ethertype"]), str(raw["protocol"]), int(low or 0), str(raw["remote_ip_prefix"])) \
        if ours else None
    return RuleRecord(str(raw["id"]), str(raw["direction"]), rule)


def _port(raw: Any) -> PortRecord:
    return PortRecord(raw.id, raw.device_id or "", tuple(ip["subnet_id"] for ip in raw.fixed_ips or ()),
                      tuple(raw.security_group_ids or ()), int(raw.revision_number or 0),
                      raw.is_port_security_enabled is not False)


def _fip(raw: Any) -> FloatingIP:
    return FloatingIP(id=raw.id, address=raw.floating_ip_address or "", port_id=raw.port_id or "",
                      description=raw.description or "")


class OctaviaClient:
    """:class:`OctaviaAPI` over an openstacksdk Connection; every failure is a RegionError."""

    def __init__(self, region: str, connection: Any, breaker: RegionBreaker | None = None) -> None:
        self.region = region
        self._conn = connection
        self._breaker = breaker

    def _do(self, what: str, call: Callable[[], Any]) -> Any:
        with region_errors(self.region, what, self._breaker):
            return call()

    def _get(self, what: str, call: Callable[[], Any]) -> Any:
        return get_or_none(self.region, what, call, self._breaker)

    @property
    def _lbs(self) -> Any:
        return self._conn.load_balancer

    def find_load_balancers(self, name: str) -> list[LBRecord]:
        return self._do(f"list load balancers named {name}",
                        lambda: [_lb(x) for x in self._lbs.load_balancers(name=name)])

    def get_load_balancer(self, lb_id: str) -> LBRecord | None:
        raw = self._get(f"GET load balancer {lb_id}", lambda: self._lbs.get_load_balancer(lb_id))
        return None if raw is None else _lb(raw)

    def create_load_balancer(self, desired: DesiredLB) -> LBRecord:
        attrs: dict[str, Any] = {"name": desired.name, "description": desired.description}
        for key, value in (("vip_subnet_id", desired.vip_subnet_id), ("vip_network_id", desired.vip_network_id),
                           ("vip_address", desired.vip_address), ("provider", desired.provider),
                           ("flavor_id", desired.flavor_id), ("availability_zone", desired.availability_zone)):
            if value:
                attrs[key] = value
        return self._do(f"create load balancer {desired.name}", lambda: _lb(self._lbs.create_load_balancer(**attrs)))

    def delete_load_balancer(self, lb_id: str) -> None:
        self._do(f"delete load balancer {lb_id}",
                 lambda: self._lbs.delete_load_balancer(lb_id, cascade=True, ignore_missing=True))

    def get_listener(self, listener_id: str) -> ListenerRecord | None:
        raw = self._get(f"GET listener {listener_id}", lambda: self._lbs.get_listener(listener_id))
        if raw is None:
            return None
        limit = raw.connection_limit
        return ListenerRecord(raw.id, raw.name or "", raw.protocol, int(raw.protocol_port),
                              raw.default_pool_id or "", -1 if limit is None else int(limit),
                              _cidrs(raw.allowed_cidrs))

    def create_listener(self, lb_id: str, listener: Listener) -> ListenerRecord:
        extra = {"allowed_cidrs": list(listener.allowed_cidrs)} if listener.allowed_cidrs else {}
        raw = self._do(f"create listener {listener.name}", lambda: self._lbs.create_listener(
            load_balancer_id=lb_id, name=listener.name, protocol=listener.protocol,
            protocol_port=listener.port, connection_limit=listener.connection_limit, **extra))
        # What Octavia answered, not what was asked: an Octavia that ignores the
        # attribute must show as unrestricted.
        return ListenerRecord(raw.id, raw.name or "", listener.protocol, listener.port, "", listener.connection_limit,
                              _cidrs(raw.allowed_cidrs))

    def update_listener(self, listener_id: str, connection_limit: int, allowed_cidrs: tuple[str, ...]) -> None:
        # Octavia takes null for "every source" (an empty list is refused).
        self._do(f"update listener {listener_id}", lambda: self._lbs.update_listener(
            listener_id, connection_limit=connection_limit, allowed_cidrs=list(allowed_cidrs) or None))

    def delete_listener(self, listener_id: str) -> None:
        self._do(f"delete listener {listener_id}", lambda: self._lbs.delete_listener(listener_id, ignore_missing=True))

    def get_pool(self, pool_id: str) -> PoolRecord | None:
        raw = self._get(f"GET pool {pool_id}", lambda: self._lbs.get_pool(pool_id))
        if raw is None:
            return None
        return PoolRecord(raw.id, raw.name or "", raw.protocol, raw.lb_algorithm, raw.health_monitor_id or "")

    def create_pool(self, listener_id: str, listener: Listener) -> PoolRecord:
        raw = self._do(f"create pool {listener.pool_name}", lambda: self._lbs.create_pool(
            listener_id=listener_id, name=listener.pool_name, protocol=listener.pool_protocol,
            lb_algorithm=listener.lb_method))
        return PoolRecord(raw.id, raw.name or "", listener.pool_protocol, listener.lb_method, "")

    def update_pool(self, pool_id: str, lb_method: str) -> None:
        self._do(f"update pool {pool_id}", lambda: self._lbs.update_pool(pool_id, lb_algorithm=lb_method))

    def delete_pool(self, pool_id: str) -> None:
        self._do(f"delete pool {pool_id}", lambda: self._lbs.delete_pool(pool_id, ignore_missing=True))

    def members(self, pool_id: str) -> list[MemberRecord]:
        return self._do(f"list members of pool {pool_id}", lambda: [
            MemberRecord(x.id, x.name or "", x.address, int(x.protocol_port), int(x.monitor_port or 0))
            for x in self._lbs.members(pool_id)])

    def replace_members(self, pool_id: str, members: tuple[Member, ...], subnet_id: str) -> None:
        """Octavia's batch member update (PUT .../members); openstacksdk has no call for it."""
        body = [{"name": mem.name, "address": mem.address, "protocol_port": mem.port,
                 **({"monitor_port": mem.monitor_port} if mem.monitor_port else {}),
                 **({"subnet_id": subnet_id} if subnet_id else {})} for mem in members]
        self._do(f"update members of pool {pool_id}",
                 lambda: self._lbs.put(f"/lbaas/pools/{pool_id}/members", json={"members": body}))

    def get_monitor(self, monitor_id: str) -> MonitorRecord | None:
        raw = self._get(f"GET health monitor {monitor_id}", lambda: self._lbs.get_health_monitor(monitor_id))
        if raw is None:
            return None
        return MonitorRecord(raw.id, raw.type, int(raw.delay), int(raw.timeout), int(raw.max_retries),
                             int(raw.max_retries_down or 0), (raw.url_path or "") if raw.type == "HTTP" else "")

    def create_monitor(self, pool_id: str, name: str, monitor: Monitor) -> None:
        self._do(f"create health monitor {name}", lambda: self._lbs.create_health_monitor(
            pool_id=pool_id, name=name, type=monitor.type, delay=monitor.delay, timeout=monitor.timeout,
            max_retries=monitor.max_retries, max_retries_down=monitor.max_retries_down, **_http(monitor)))

    def update_monitor(self, monitor_id: str, monitor: Monitor) -> None:
        self._do(f"update health monitor {monitor_id}", lambda: self._lbs.update_health_monitor(
            monitor_id, delay=monitor.delay, timeout=monitor.timeout, max_retries=monitor.max_retries,
            max_retries_down=monitor.max_retries_down, **_http(monitor)))

    def delete_monitor(self, monitor_id: str) -> None:
        self._do(f"delete health monitor {monitor_id}",
                 lambda: self._lbs.delete_health_monitor(monitor_id, ignore_missing=True))

    def floating_ips_on_port(self, port_id: str) -> list[FloatingIP]:
        return self._do(f"list floating IPs of port {port_id}",
                        lambda: [_fip(x) for x in self._conn.network.ips(port_id=port_id)])

    def find_floating_ip(self, address: str) -> FloatingIP | None:
        found = self._do(f"find floating IP {address}",
                         lambda: [_fip(x) for x in self._conn.network.ips(floating_ip_address=address)])
        return found[0] if found else None

    def floating_ips_described(self, description: str) -> list[FloatingIP]:
        return self._do("list floating IPs by description",
                        lambda: [_fip(x) for x in self._conn.network.ips(description=description)])

    def create_floating_ip(self, network_id: str, port_id: str, description: str) -> FloatingIP:
        return self._do(f"create floating IP on {network_id}", lambda: _fip(self._conn.network.create_ip(
            floating_network_id=network_id, port_id=port_id, description=description)))

    def set_floating_ip_port(self, fip_id: str, port_id: str | None) -> None:
        self._do(f"update floating IP {fip_id}", lambda: self._conn.network.update_ip(fip_id, port_id=port_id))

    def delete_floating_ip(self, fip_id: str) -> None:
        self._do(f"delete floating IP {fip_id}", lambda: self._conn.network.delete_ip(fip_id, ignore_missing=True))

    # --- security groups (manage-security-groups) ---

    def get_subnet(self, subnet_id: str) -> Subnet | None:
        raw = self._get(f"GET subnet {subnet_id}", lambda: self._conn.network.get_subnet(subnet_id))
        return None if raw is None else Subnet(raw.cidr, int(raw.ip_version))

    def find_security_groups(self, name: str) -> list[GroupRecord]:
        return self._do(f"list security groups named {name}",
                        lambda: [_group(g) for g in self._conn.network.security_groups(name=name)])

    def create_security_group(self, name: str, description: str) -> GroupRecord:
        return self._do(f"create security group {name}", lambda: _group(
            self._conn.network.create_security_group(name=name, description=description)))

    def create_security_group_rule(self, group_id: str, rule: Rule) -> None:
        self._do(f"create rule in security group {group_id}", lambda: self._conn.network.create_security_group_rule(
            security_group_id=group_id, direction="ingress", ether_type=rule.ethertype, protocol=rule.protocol,
            port_range_min=rule.port, port_range_max=rule.port, remote_ip_prefix=rule.remote_ip_prefix))

    def delete_security_group_rule(self, rule_id: str) -> None:
        self._do(f"delete security group rule {rule_id}",
                 lambda: self._conn.network.delete_security_group_rule(rule_id, ignore_missing=True))

    def delete_security_group(self, group_id: str) -> None:
        self._do(f"delete security group {group_id}",
                 lambda: self._conn.network.delete_security_group(group_id, ignore_missing=True))

    def server_ports(self, server_id: str) -> list[PortRecord]:
        return self._do(f"list ports of server {server_id}",
                        lambda: [_port(p) for p in self._conn.network.ports(device_id=server_id)])

    def ports_with_security_group(self, group_id: str) -> list[PortRecord]:
        return self._do(f"list ports in security group {group_id}",
                        lambda: [_port(p) for p in self._conn.network.ports(security_groups=[group_id])])

    def set_port_security_groups(self, port_id: str, groups: tuple[str, ...], revision: int) -> None:
        from openstack import exceptions as sdk_exc

        try:
            self._do(f"update security groups of port {port_id}", lambda: self._conn.network.update_port(
                port_id, if_revision=revision, security_group_ids=list(groups)))
        except RegionError as exc:
            cause = exc.__cause__
            if isinstance(cause, sdk_exc.HttpException) and cause.status_code == 412:
                raise LBError(self.region, f"port {port_id} changed while its security groups were "
                                           f"being set: retrying") from exc
            raise


class OctaviaClients:
    """Lazy per-region :class:`OctaviaClient` on the CCM's one session.

    Its own breaker: a hung Octavia must not pause the region's Nova lookups.
    """

    def __init__(self, session: Any, regions: tuple[str, ...], interface: str = "public",
                 connect: Callable[[Any, str, str], Any] = sdk_connection,
                 breaker: RegionBreaker | None = None) -> None:
        self.session = session
        self.regions = regions
        self.interface = interface
        self.breaker = breaker if breaker is not None else RegionBreaker()
        self._connect = connect
        self._clients: RegionCache[OctaviaClient] = RegionCache(regions, self.breaker)

    def client(self, region: str) -> OctaviaClient:
        return self._clients.get(region, lambda: self._build(region))

    def _build(self, region: str) -> OctaviaClient:
        from keystoneauth1 import exceptions as ksa_exc

        for service in SERVICES:
            with region_errors(region, f"{service} endpoint lookup"):
                try:
                    url = self.session.get_endpoint(service_type=service, interface=self.interface,
                                                    region_name=region)
                except ksa_exc.EndpointNotFound:
                    url = None
            if not url:
                error = NoOctavia if service == "load-balancer" else RegionError
                raise error(region, f"no {service} endpoint ({self.interface}) in the service catalog")
        return OctaviaClient(region, self._connect(self.session, region, self.interface), self.breaker)
