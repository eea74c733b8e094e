"""An in-memory Octavia + floating IPs for one region, for unit tests of convergence."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from isthmus.ccm.errors import RegionError
from isthmus.ccm.openstack.loadbalancer.octavia import (
    FloatingIP,
    LBError,
    LBRecord,
    ListenerRecord,
    MemberRecord,
    MonitorRecord,
    NoOctavia,
    PoolRecord,
)
from isthmus.ccm.openstack.loadbalancer.plan import DesiredLB, Listener, Member, Monitor
from isthmus.ccm.openstack.loadbalancer.secgroups import GroupRecord, PortRecord, Rule, RuleRecord, Subnet

_ids = itertools.count(1)


def new_id(kind: str) -> str:
    return f"{kind}-{next(_ids)}"


@dataclass
class FakeOctavia:
    region: str
    lbs: dict[str, LBRecord] = field(default_factory=dict)
    listeners: dict[str, ListenerRecord] = field(default_factory=dict)
    pools: dict[str, PoolRecord] = field(default_factory=dict)
    members_: dict[str, dict[str, MemberRecord]] = field(default_factory=dict)  # pool -> id -> member
    monitors: dict[str, MonitorRecord] = field(default_factory=dict)
    fips: dict[str, FloatingIP] = field(default_factory=dict)
    down: bool = False
    writes: list[str] = field(default_factory=list)
    pending_reads: int = 0  # get_load_balancer answers PENDING_UPDATE this many times
    subnets: dict[str, str] = field(default_factory=dict)  # member address -> subnet seen
    ignores_cidrs: bool = False  # an Octavia (API < 2.12, or a provider) without allowed_cidrs
    # Neutron's side of manage-security-groups
    subnet_cidrs: dict[str, Subnet] = field(default_factory=dict)
    groups: dict[str, GroupRecord] = field(default_factory=dict)
    ports: dict[str, PortRecord] = field(default_factory=dict)

    def _read(self, what: str) -> None:
        if self.down:
            raise RegionError(self.region, f"{what}: 503 Service Unavailable")

    def _write(self, what: str) -> None:
        self._read(what)
        self.writes.append(what)

    def find_load_balancers(self, name: str) -> list[LBRecord]:
        self._read("list")
        return [lb for lb in self.lbs.values() if lb.name == name]

    def get_load_balancer(self, lb_id: str) -> LBRecord | None:
        self._read("get lb")
        lb = self.lbs.get(lb_id)
        if lb is not None and self.pending_reads > 0:
            self.pending_reads -= 1
            return replace(lb, provisioning_status="PENDING_UPDATE")
        return lb

    def create_load_balancer(self, desired: DesiredLB) -> LBRecord:
        self._write(f"create lb {desired.name}")
        lb = LBRecord(new_id("lb"), desired.name, desired.description, "ACTIVE", "10.9.0.1", new_id("port"))
        self.lbs[lb.id] = lb
        return lb

    def delete_load_balancer(self, lb_id: str) -> None:
        self._write(f"delete lb {lb_id}")
        lb = self.lbs.pop(lb_id)
        for lid in lb.listener_ids:
            listener = self.listeners.pop(lid)
            if listener.default_pool_id:
                self.delete_pool(listener.default_pool_id)

    def get_listener(self, listener_id: str) -> ListenerRecord | None:
        self._read("get listener")
        return self.listeners.get(listener_id)

    def create_listener(self, lb_id: str, listener: Listener) -> ListenerRecord:
        self._write(f"create listener {listener.protocol}/{listener.port}")
        rec = ListenerRecord(new_id("listener"), listener.name, listener.protocol, listener.port, "",
                             listener.connection_limit, () if self.ignores_cidrs else listener.allowed_cidrs)
        self.listeners[rec.id] = rec
        lb = self.lbs[lb_id]
        self.lbs[lb_id] = replace(lb, listener_ids=(*lb.listener_ids, rec.id))
        return rec

    def update_listener(self, listener_id: str, connection_limit: int, allowed_cidrs: tuple[str, ...] = ()) -> None:
        self._write(f"update listener {listener_id}")
        self.listeners[listener_id] = replace(self.listeners[listener_id], connection_limit=connection_limit,
                                              allowed_cidrs=() if self.ignores_cidrs else allowed_cidrs)

    def delete_listener(self, listener_id: str) -> None:
        self._write(f"delete listener {listener_id}")
        self.listeners.pop(listener_id)
        for lb_id, lb in self.lbs.items():
            self.lbs[lb_id] = replace(lb, listener_ids=tuple(i for i in lb.listener_ids if i != listener_id))

    def get_pool(self, pool_id: str) -> PoolRecord | None:
        self._read("get pool")
        return self.pools.get(pool_id)

    def create_pool(self, listener_id: str, listener: Listener) -> PoolRecord:
        self._write(f"create pool {listener.pool_protocol}")
        rec = PoolRecord(new_id("pool"), listener.pool_name, listener.pool_protocol, listener.lb_method)
        self.pools[rec.id] = rec
        self.members_[rec.id] = {}
        self.listeners[listener_id] = replace(self.listeners[listener_id], default_pool_id=rec.id)
        return rec

    def update_pool(self, pool_id: str, lb_method: str) -> None:
        self._write(f"update pool {lb_method}")
        self.pools[pool_id] = replace(self.pools[pool_id], lb_algorithm=lb_method)

    def delete_pool(self, pool_id: str) -> None:
        self._write(f"delete pool {pool_id}")
        pool = self.pools.pop(pool_id)
        self.members_.pop(pool_id, None)
        if pool.healthmonitor_id:
            self.monitors.pop(pool.healthmonitor_id, None)
        for lid, listener in self.listeners.items():
            if listener.default_pool_id == pool_id:
                self.listeners[lid] = replace(listener, default_pool_id="")

    def members(self, pool_id: str) -> list[MemberRecord]:
        self._read("members")
        return list(self.members_[pool_id].values())

    def replace_members(self, pool_id: str, members: tuple[Member, ...], subnet_id: str) -> None:
        """Octavia's batch update: matching members kept, others added or removed."""
        current = {(r.address, r.port, r.monitor_port): r for r in self.members_[pool_id].values()}
        wanted = {(mem.address, mem.port, mem.monitor_port) for mem in members}
        self._write("replace members " + " ".join(sorted(f"{a}:{p}" for a, p, _ in wanted)))
        for key, rec in current.items():
            if key not in wanted:
                self.members_[pool_id].pop(rec.id)
        for member in members:
            if (member.address, member.port, member.monitor_port) not in current:
                rec = MemberRecord(new_id("member"), member.name, member.address, member.port, member.monitor_port)
                self.members_[pool_id][rec.id] = rec
                self.subnets[member.address] = subnet_id

    def get_monitor(self, monitor_id: str) -> MonitorRecord | None:
        self._read("get monitor")
        return self.monitors.get(monitor_id)

    def create_monitor(self, pool_id: str, name: str, monitor: Monitor) -> None:
        self._write(f"create monitor {monitor.type}")
        rec = MonitorRecord(new_id("hm"), monitor.type, monitor.delay, monitor.timeout, monitor.max_retries,
                            monitor.max_retries_down, monitor.url_path)
        self.monitors[rec.id] = rec
        self.pools[pool_id] = replace(self.pools[pool_id], healthmonitor_id=rec.id)

    def update_monitor(self, monitor_id: str, monitor: Monitor) -> None:
        self._write("update monitor")
        self.monitors[monitor_id] = MonitorRecord(monitor_id, monitor.type, monitor.delay, monitor.timeout,
                                                  monitor.max_retries, monitor.max_retries_down, monitor.url_path)

    def delete_monitor(self, monitor_id: str) -> None:
        self._write("delete monitor")
        self.monitors.pop(monitor_id)
        for pid, pool in self.pools.items():
            if pool.healthmonitor_id == monitor_id:
                self.pools[pid] = replace(pool, healthmonitor_id="")

    def floating_ips_on_port(self, port_id: str) -> list[FloatingIP]:
        self._read("fips")
        return [f for f in self.fips.values() if f.port_id == port_id]

    def find_floating_ip(self, address: str) -> FloatingIP | None:
        self._read("find fip")
        return next((f for f in self.fips.values() if f.address == address), None)

    def floating_ips_described(self, description: str) -> list[FloatingIP]:
        self._read("fips by description")
        return [f for f in self.fips.values() if f.description == description]

    def create_floating_ip(self, network_id: str, port_id: str, description: str) -> FloatingIP:
        self._write(f"create fip on {network_id}")
        fip = FloatingIP(new_id("fip"), f"203.0.113.{len(self.fips) + 10}", port_id, description)
        self.fips[fip.id] = fip
        return fip

    def set_floating_ip_port(self, fip_id: str, port_id: str | None) -> None:
        self._write(f"set fip {self.fips[fip_id].address} port {port_id}")
        self.fips[fip_id] = replace(self.fips[fip_id], port_id=port_id or "")

    def delete_floating_ip(self, fip_id: str) -> None:
        self._write(f"delete fip {self.fips[fip_id].address}")
        self.fips.pop(fip_id)

    def get_subnet(self, subnet_id: str) -> Subnet | None:
        self._read("get subnet")
        return self.subnet_cidrs.get(subnet_id)

    def find_security_groups(self, name: str) -> list[GroupRecord]:
        self._read("list groups")
        return [g for g in self.groups.values() if g.name == name]

    def create_security_group(self, name: str, description: str) -> GroupRecord:
        self._write(f"create group {name}")
        egress = tuple(RuleRecord(new_id("rule"), "egress", None) for _ in ("IPv4", "IPv6"))  # Neutron's defaults
        group = GroupRecord(new_id("sg"), name, description, egress)
        self.groups[group.id] = group
        return group

    def create_security_group_rule(self, group_id: str, rule: Rule) -> None:
        self._write(f"add rule {rule.protocol}/{rule.port} from {rule.remote_ip_prefix}")
        group = self.groups[group_id]
        self.groups[group_id] = replace(group, rules=(*group.rules, RuleRecord(new_id("rule"), "ingress", rule)))

    def delete_security_group_rule(self, rule_id: str) -> None:
        self._write(f"delete rule {rule_id}")
        for gid, group in self.groups.items():
            self.groups[gid] = replace(group, rules=tuple(r for r in group.rules if r.id != rule_id))

    def delete_security_group(self, group_id: str) -> None:
        self._write(f"delete group {self.groups[group_id].name}")
        assert not self.ports_with_security_group(group_id), "Neutron refuses: the group is in use"
        self.groups.pop(group_id)

    def server_ports(self, server_id: str) -> list[PortRecord]:
        self._read("ports of server")
        return [p for p in self.ports.values() if p.device_id == server_id]

    def ports_with_security_group(self, group_id: str) -> list[PortRecord]:
        self._read("ports in group")
        return [p for p in self.ports.values() if group_id in p.security_groups]

    def set_port_security_groups(self, port_id: str, groups: tuple[str, ...], revision: int) -> None:
        port = self.ports[port_id]
        if port.revision != revision:
            raise LBError(self.region, f"port {port_id} changed: retrying")
        self._write(f"port {port_id} groups {len(groups)}")
        self.ports[port_id] = replace(port, security_groups=groups, revision=revision + 1)

    # --- views for assertions ---

    def tree(self) -> dict[str, dict]:
        out = {}
        for lb in self.lbs.values():
            listeners = {}
            for lid in lb.listener_ids:
                listener = self.listeners[lid]
                pool = self.pools.get(listener.default_pool_id)
                listeners[(listener.protocol, listener.port)] = None if pool is None else {
                    "protocol": pool.protocol, "method": pool.lb_algorithm,
                    "members": sorted((mem.address, mem.port) for mem in self.members_[pool.id].values()),
                    "monitor": self.monitors[pool.healthmonitor_id].type if pool.healthmonitor_id else None,
                }
            out[lb.name] = listeners
        return out


@dataclass
class FakeOctaviaRegions:
    regions: dict[str, FakeOctavia]

    def client(self, region: str) -> FakeOctavia:
        if region not in self.regions:
            raise NoOctavia(region, "no load-balancer endpoint (public) in the service catalog")
        return self.regions[region]
