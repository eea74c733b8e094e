"""The load balancers a Service should have: pure, from the Service, its Nodes and the options.

Placement: **one Octavia load balancer per region that has member nodes.**
An Octavia load balancer lives in one region's Octavia and reaches members
through that region's Neutron (its amphorae plug into that region's networks);
it cannot balance onto servers of another region. So a Service whose nodes
span RegionOne and RegionTwo gets a load balancer in each, and every region's
address is listed in ``status.loadBalancer.ingress`` (clients or DNS pick one).
``loadbalancer.openstack.org/region: R`` restricts the Service to region R and
its nodes there.

Names follow OCCM (``kube_service_<cluster>_<namespace>_<name>``, listeners
``listener_<i>_<lb>``, pools ``pool_<i>_<lb>``, monitors ``monitor_<i>_<lb>``,
members named after their Node). The description carries the Service's UID:
only a load balancer with our description is ever changed or deleted.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from isthmus.ccm.gcfg import parse_bool
from isthmus.ccm.openstack.loadbalancer import model as m
from isthmus.ccm.openstack.loadbalancer.options import LB_METHODS, LBOptions, LoadBalancerConfig

NAME_LIMIT = 255  # Octavia's name length
DESCRIPTION_PREFIX = "isthmus-ccm"
PROTOCOLS = ("TCP", "UDP", "SCTP")


@dataclass(frozen=True)
class Monitor:
    type: str  # TCP, UDP-CONNECT, SCTP; HTTP for externalTrafficPolicy: Local
    delay: int
    timeout: int
    max_retries: int
    max_retries_down: int
    url_path: str = ""  # HTTP: kube-proxy's health check path


@dataclass(frozen=True)
class Member:
    name: str
    address: str
    port: int
    monitor_port: int = 0  # 0: the member's port; Local: the Service's healthCheckNodePort


@dataclass(frozen=True)
class Listener:
    """A listener and its one pool (Octavia: the listener's default pool)."""

    name: str
    pool_name: str
    protocol: str  # the listener's
    port: int
    pool_protocol: str  # PROXY when proxy-protocol is on
    lb_method: str
    members: tuple[Member, ...]
    monitor: Monitor | None
    monitor_name: str
    connection_limit: int = -1
    allowed_cidrs: tuple[str, ...] = ()  # empty: open to every source

    @property
    def key(self) -> tuple[str, int]:
        return (self.protocol, self.port)


@dataclass(frozen=True)
class SecurityGroupPlan:
    """``manage-security-groups``: the region's group of one Service (secgroups.py)."""

    name: str
    description: str
    member_subnet_id: str
    node_ports: tuple[tuple[str, int], ...]  # (tcp/udp/sctp, port): NodePorts and healthCheckNodePort
    servers: tuple[str, ...]  # member nodes' server ids
    provider: str = ""
    source_ranges: tuple[str, ...] = ()


@dataclass(frozen=True)
class DesiredLB:
    region: str
    name: str
    description: str
    vip_subnet_id: str
    vip_network_id: str
    member_subnet_id: str
    provider: str
    flavor_id: str
    availability_zone: str
    listeners: tuple[Listener, ...]
    floating_network_id: str  # "" for an internal load balancer or none configured
    keep_floatingip: bool
    floating_ip: str  # an existing floating IP to use instead of allocating one
    vip_address: str = ""  # an internal load balancer's requested VIP (spec.loadBalancerIP)
    security_group: SecurityGroupPlan | None = None  # None: no group (an existing one of ours is removed)
    # manage-security-groups is on but no group can be planned (no member subnet): an
    # existing group is left as it is, never removed for a gap in the configuration.
    keep_security_group: bool = False


@dataclass
class Plan:
    """What to converge to; ``problems`` become Warning events."""

    load_balancers: dict[str, DesiredLB] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    unknown_annotations: list[str] = field(default_factory=list)
    hostname: str = ""
    # No member node anywhere: existing load balancers are left as they are
    # rather than deleted (a transient empty node list must not tear them down).
    no_nodes: bool = False
    # Regions with member nodes but no usable plan (e.g. no subnet configured):
    # a configuration mistake must not delete the load balancers already there.
    skipped: set[str] = field(default_factory=set)


def lb_name(cluster: str, namespace: str, name: str) -> str:
    return f"kube_service_{cluster}_{namespace}_{name}"[:NAME_LIMIT]


def security_group_name(lb: str) -> str:
    return f"lb-sg-{lb}"[:NAME_LIMIT]


def ownership_marker(uid: str) -> str:
    """The part of the description that makes a load balancer ours."""
    return f"{DESCRIPTION_PREFIX} uid={uid}"


def lb_description(service: m.ServiceView, cluster: str) -> str:
    return f"{ownership_marker(service.uid)} service={service.key} cluster={cluster}"


def is_ours(description: str | None, uid: str) -> bool:
    return bool(uid) and (description or "").startswith(ownership_marker(uid) + " ")


LOCAL_HEALTH_PATH = "/healthz"


def source_ranges(service: m.ServiceView) -> tuple[str, ...]:
    """``spec.loadBalancerSourceRanges``, else Kubernetes' annotation; normalised and
    sorted. ValueError naming the range that is not a CIDR."""
    raw = list(service.source_ranges) or [
        r for r in m.annotation(service.annotations, m.ANN_SOURCE_RANGES).split(",") if r.strip()]
    cidrs = set()
    for entry in raw:
        try:
            cidrs.add(str(ipaddress.ip_network(entry.strip(), strict=False)))
        except ValueError:
            raise ValueError(f"loadBalancerSourceRanges: {entry.strip()!r} is not a CIDR: "
                             f"load balancers left as they are") from None
    return tuple(sorted(cidrs))


def member_nodes(nodes: Iterable[m.LBNode]) -> list[m.LBNode]:
    """Ready, schedulable, not excluded, with an address; sorted by name."""
    return sorted((n for n in nodes if n.ready and not n.unschedulable and not n.excluded and n.address),
                  key=lambda n: n.name)


def _int(annotations: Mapping[str, str], key: str, default: int, problems: list[str]) -> int:
    raw = m.annotation(annotations, key)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        problems.append(f"annotation {key}={raw!r} is not an integer: using {default}")
        return default


def _bool(annotations: Mapping[str, str], key: str, default: bool, problems: list[str]) -> bool:
    raw = m.annotation(annotations, key)
    if not raw:
        return default
    try:
        return parse_bool(raw)
    except ValueError:
        problems.append(f"annotation {key}={raw!r} is not a boolean: using {default}")
        return default


def _monitor(service: m.ServiceView, opts: LBOptions, pool_protocol: str, problems: list[str]) -> Monitor | None:
    ann = service.annotations
    if not _bool(ann, m.ANN_ENABLE_MONITOR, opts.create_monitor, problems):
        return None
    kind = {"UDP": "UDP-CONNECT", "SCTP": "SCTP"}.get(pool_protocol, "TCP")
    local = service.local_health_port > 0
    return Monitor(
        # externalTrafficPolicy: Local: kube-proxy answers 200 on the healthCheckNodePort
        # only on nodes with an endpoint; the others must leave the pool (as OCCM does).
        type="HTTP" if local else kind,
        url_path=LOCAL_HEALTH_PATH if local else "",
        delay=_int(ann, m.ANN_MONITOR_DELAY, opts.monitor_delay, problems),
        timeout=_int(ann, m.ANN_MONITOR_TIMEOUT, opts.monitor_timeout, problems),
        max_retries=_int(ann, m.ANN_MONITOR_MAX_RETRIES, opts.monitor_max_retries, problems),
        max_retries_down=_int(ann, m.ANN_MONITOR_MAX_RETRIES_DOWN, opts.monitor_max_retries_down, problems),
    )


def _listeners(service: m.ServiceView, name: str, opts: LBOptions, nodes: Sequence[m.LBNode],
               cidrs: tuple[str, ...], problems: list[str]) -> tuple[Listener, ...]:
    ann = service.annotations
    method = (m.annotation(ann, m.ANN_LB_METHOD) or opts.lb_method).upper()
    if method not in LB_METHODS:
        problems.append(f"annotation {m.ANN_LB_METHOD}={method!r} is unknown: using {opts.lb_method}")
        method = opts.lb_method
    proxy = _bool(ann, m.ANN_PROXY_PROTOCOL, False, problems)
    limit = _int(ann, m.ANN_CONNECTION_LIMIT, -1, problems)
    listeners = []
    for index, port in enumerate(service.ports):
        if port.protocol not in PROTOCOLS:
            problems.append(f"port {port.port}/{port.protocol}: protocol not supported by Octavia, skipped")
            continue
        if not port.node_port:
            problems.append(f"port {port.port}/{port.protocol} has no nodePort yet, skipped")
            continue
        pool_protocol = port.protocol
        if proxy:
            if port.protocol == "TCP":
                pool_protocol = "PROXY"
            else:
                problems.append(f"proxy-protocol applies to TCP only: port {port.port}/{port.protocol} without it")
        listeners.append(Listener(
            name=f"listener_{index}_{name}"[:NAME_LIMIT],
            pool_name=f"pool_{index}_{name}"[:NAME_LIMIT],
            protocol=port.protocol,
            port=port.port,
            pool_protocol=pool_protocol,
            lb_method=method,
            members=tuple(Member(n.name, n.address, port.node_port, service.local_health_port) for n in nodes),
            monitor=_monitor(service, opts, pool_protocol, problems),
            monitor_name=f"monitor_{index}_{name}"[:NAME_LIMIT],
            connection_limit=limit,
            allowed_cidrs=cidrs,
        ))
    keys = [lst.key for lst in listeners]
    if len(keys) != len(set(keys)):
        problems.append("two ports share a protocol and port: Octavia allows one listener per protocol/port")
    return tuple(listeners)


def plan_service(service: m.ServiceView, nodes: Iterable[m.LBNode], config: LoadBalancerConfig,
                 regions: Sequence[str], cluster: str = "kubernetes") -> Plan:
    """The desired load balancers of ``service`` per region (``regions``: those configured)."""
    plan = Plan(unknown_annotations=m.unknown_annotations(service.annotations))
    ann = service.annotations
    plan.hostname = m.annotation(ann, m.ANN_HOSTNAME)
    # A region is wanted while the cluster has a node there (any state): a WAN
    # partition (NotReady) or a maintenance cordon empties the region's pool but
    # keeps its load balancer and floating IP, so the Service's address stays.
    nodes = list(nodes)
    by_region: dict[str, list[m.LBNode]] = {n.region: [] for n in nodes if not n.excluded}
    for node in member_nodes(nodes):
        by_region[node.region].append(node)
    if "" in by_region:
        names = ", ".join(n.name for n in by_region.pop(""))
        plan.problems.append(f"nodes with no region (no providerID region, no {m.LABEL_REGION} label): {names}")
    for region in sorted(set(by_region) - set(regions)):
        plan.problems.append(f"nodes in region {region}, which this CCM does not serve: no load balancer there")
        by_region.pop(region)
    wanted = m.annotation(ann, m.ANN_REGION)
    if wanted:
        if wanted not in regions:
            plan.problems.append(f"annotation {m.ANN_REGION}={wanted!r} is not a configured region")
            plan.no_nodes = True  # change nothing until the annotation is fixed
            return plan
        by_region = {wanted: by_region.get(wanted, [])}
        if not by_region[wanted]:
            plan.problems.append(f"no member node in region {wanted} (annotation {m.ANN_REGION})")
    elif not by_region:
        plan.no_nodes = True
        plan.problems.append("no node to use as a member: load balancers left as they are")
        return plan
    try:
        cidrs = source_ranges(service)
    except ValueError as exc:
        # A range that cannot be read must never leave the Service open to the world:
        # change nothing until it is fixed.
        plan.problems.append(str(exc))
        plan.no_nodes = True
        return plan
    for region, members in sorted(by_region.items()):
        if not members:
            plan.problems.append(f"region {region}: no Ready, schedulable node: its pools are emptied, its load "
                                 f"balancer and address kept")
    name = lb_name(cluster, service.namespace, service.name)
    if service.load_balancer_ip and len(by_region) > 1:
        plan.problems.append("spec.loadBalancerIP names one floating IP but the Service spans several regions: "
                             "it is used in none; set loadbalancer.openstack.org/region")
    for region in sorted(by_region):
        lb = _desired(service, region, name, config.options_for(region), by_region[region], cluster,
                      len(by_region), cidrs, plan.problems)
        if lb is not None:
            plan.load_balancers[region] = lb
        else:
            plan.skipped.add(region)
    return plan


def _desired(service: m.ServiceView, region: str, name: str, opts: LBOptions, nodes: Sequence[m.LBNode],
             cluster: str, region_count: int, cidrs: tuple[str, ...], problems: list[str]) -> DesiredLB | None:
    ann = service.annotations
    subnet = m.annotation(ann, m.ANN_SUBNET_ID, region) or opts.subnet_id
    network = m.annotation(ann, m.ANN_NETWORK_ID, region) or opts.network_id
    if not subnet and not network:
        problems.append(f"region {region}: no subnet-id or network-id for the VIP "
                        f'([LoadBalancer "{region}"] subnet-id, or annotation {m.ANN_SUBNET_ID}.{region})')
        return None
    internal = _bool(ann, m.ANN_INTERNAL, opts.internal_lb, problems)
    floating = "" if internal else (m.annotation(ann, m.ANN_FLOATING_NETWORK_ID, region) or opts.floating_network_id)
    requested = (m.annotation(ann, m.ANN_LB_ADDRESS) or service.load_balancer_ip) if region_count == 1 else ""
    member_subnet = m.annotation(ann, m.ANN_MEMBER_SUBNET_ID, region) or opts.member_subnet_id or subnet
    listeners = _listeners(service, name, opts, nodes, cidrs, problems)
    group = None
    if opts.manage_security_groups and member_subnet:
        group = _security_group(service, name, member_subnet, nodes, opts.lb_provider, cidrs, cluster)
    elif opts.manage_security_groups:
        problems.append(f"region {region}: manage-security-groups needs a member subnet (subnet-id or "
                        f"member-subnet-id): no security group managed")
    return DesiredLB(
        region=region,
        name=name,
        description=lb_description(service, cluster),
        vip_subnet_id=subnet,
        vip_network_id="" if subnet else network,
        member_subnet_id=member_subnet,
        provider=opts.lb_provider,
        flavor_id=m.annotation(ann, m.ANN_FLAVOR_ID) or opts.flavor_id,
        availability_zone=m.annotation(ann, m.ANN_AVAILABILITY_ZONE) or opts.availability_zone,
        listeners=listeners,
        floating_network_id=floating,
        keep_floatingip=_bool(ann, m.ANN_KEEP_FLOATINGIP, False, problems),
        floating_ip="" if internal else requested,
        vip_address=requested if internal else "",
        security_group=group,
        keep_security_group=opts.manage_security_groups and group is None,
    )


def _security_group(service: m.ServiceView, name: str, member_subnet: str, nodes: Sequence[m.LBNode],
                    provider: str, cidrs: tuple[str, ...], cluster: str) -> SecurityGroupPlan:
    # From the Service, not the members: a region whose nodes are all cordoned keeps its rules.
    node_ports = {(p.protocol, p.node_port) for p in service.ports if p.protocol in PROTOCOLS and p.node_port}
    if service.local_health_port:
        node_ports.add(("TCP", service.local_health_port))  # kube-proxy's health check, HTTP
    return SecurityGroupPlan(
        name=security_group_name(name),
        description=lb_description(service, cluster),
        member_subnet_id=member_subnet,
        node_ports=tuple(sorted((proto.lower(), port) for proto, port in node_ports)),
        servers=tuple(sorted({n.server_id for n in nodes if n.server_id})),
        provider=provider,
        source_ranges=cidrs,
    )
