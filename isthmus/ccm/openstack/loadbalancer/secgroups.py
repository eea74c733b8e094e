"""``manage-security-groups``: a security group per Service and region that opens
the Service's NodePorts on its member nodes' ports, as OCCM's does.

Octavia's amphorae reach members from the member subnet, so the rules admit
that subnet's CIDR on each NodePort (and on ``healthCheckNodePort`` for
``externalTrafficPolicy: Local``). A provider that keeps the client's address
(``ovn``) is reached from the clients themselves: the rules then admit
``loadBalancerSourceRanges``, or everyone when there are none.

The group is named ``lb-sg-<load balancer name>`` and carries the ownership
marker in its description: only groups that are ours are changed or deleted.
It is added to each member node's port on the member subnet (the node's server
is the providerID's id) and taken off ports of nodes that are no longer
members; ports are written with ``If-Match`` so a concurrent edit of a port's
groups (a user, Nova) is never overwritten. When the Service leaves the region,
or the option is turned off, the group is taken off every port and deleted.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from isthmus.ccm.openstack.loadbalancer.plan import SecurityGroupPlan, is_ours

CLIENT_ADDRESS_PROVIDERS = frozenset({"ovn"})  # providers whose members see the client's address


@dataclass(frozen=True, order=True)
class Rule:
    """An ingress rule on one port."""

    ethertype: str  # IPv4 / IPv6
    protocol: str  # tcp / udp / sctp
    port: int
    remote_ip_prefix: str


@dataclass(frozen=True)
class RuleRecord:
    id: str
    direction: str
    rule: Rule | None  # None: a rule we never make (a range, a remote group): removed from our group


@dataclass(frozen=True)
class GroupRecord:
    id: str
    name: str
    description: str
    rules: tuple[RuleRecord, ...] = ()


@dataclass(frozen=True)
class PortRecord:
    id: str
    device_id: str
    subnet_ids: tuple[str, ...]
    security_groups: tuple[str, ...]
    revision: int
    port_security: bool = True


@dataclass(frozen=True)
class Subnet:
    cidr: str
    ip_version: int


class SecurityGroupAPI(Protocol):
    region: str

    def get_subnet(self, subnet_id: str) -> Subnet | None: ...
    def find_security_groups(self, name: str) -> list[GroupRecord]: ...
    def create_security_group(self, name: str, description: str) -> GroupRecord: ...
    def create_security_group_rule(self, group_id: str, rule: Rule) -> None: ...
    def delete_security_group_rule(self, rule_id: str) -> None: ...
    def delete_security_group(self, group_id: str) -> None: ...
    def server_ports(self, server_id: str) -> list[PortRecord]: ...
    def ports_with_security_group(self, group_id: str) -> list[PortRecord]: ...
    def set_port_security_groups(self, port_id: str, groups: tuple[str, ...], revision: int) -> None: ...


def wanted_rules(plan: SecurityGroupPlan, subnet: Subnet) -> set[Rule]:
    ethertype = f"IPv{subnet.ip_version}"
    if plan.provider in CLIENT_ADDRESS_PROVIDERS:
        sources = [c for c in plan.source_ranges if ipaddress.ip_network(c).version == subnet.ip_version]
        if not plan.source_ranges:
            sources = ["0.0.0.0/0" if subnet.ip_version == 4 else "::/0"]
    else:
        sources = [subnet.cidr]
    return {Rule(ethertype, protocol, port, source) for protocol, port in plan.node_ports for source in sources}


@dataclass(frozen=True)
class RuleChanges:
    create: tuple[Rule, ...]
    delete: tuple[str, ...]  # rule ids


def rule_changes(group: GroupRecord, wanted: Iterable[Rule]) -> RuleChanges:
    """Ingress rules to add and remove; egress rules (Neutron's defaults) are left alone."""
    want = set(wanted)
    have = {r.rule for r in group.rules if r.direction == "ingress" and r.rule is not None}
    extra = tuple(r.id for r in group.rules if r.direction == "ingress" and (r.rule is None or r.rule not in want))
    return RuleChanges(tuple(sorted(want - have)), extra)


def ensure_security_group(api: SecurityGroupAPI, plan: SecurityGroupPlan, uid: str) -> tuple[list[str], list[str]]:
    """Converge the region's group of one Service; (changes, problems)."""
    changes: list[str] = []
    problems: list[str] = []
    subnet = api.get_subnet(plan.member_subnet_id)
    if subnet is None:
        problems.append(f"region {api.region}: member subnet {plan.member_subnet_id} not found: "
                        f"no security group managed")
        return changes, problems
    ours = [g for g in api.find_security_groups(plan.name) if is_ours(g.description, uid)]
    if ours:
        group = ours[0]
    else:
        group = api.create_security_group(plan.name, plan.description)
        changes.append(f"created security group {group.id}")
    diff = rule_changes(group, wanted_rules(plan, subnet))
    for rule_id in diff.delete:
        api.delete_security_group_rule(rule_id)
    for rule in diff.create:
        api.create_security_group_rule(group.id, rule)
    if diff.create or diff.delete:
        changes.append(f"security group {group.id}: {len(diff.create)} rules added, {len(diff.delete)} removed")
    member_ports: dict[str, PortRecord] = {}
    for server_id in plan.servers:
        on_subnet = [p for p in api.server_ports(server_id) if plan.member_subnet_id in p.subnet_ids]
        if not on_subnet:
            problems.append(f"region {api.region}: server {server_id} has no port on member subnet "
                            f"{plan.member_subnet_id}: its NodePorts are not opened")
        for port in on_subnet:
            member_ports[port.id] = port
    for port in member_ports.values():
        if group.id in port.security_groups:
            continue
        if not port.port_security:
            problems.append(f"region {api.region}: port {port.id} has port security off: no group needed")
            continue
        api.set_port_security_groups(port.id, (*port.security_groups, group.id), port.revision)
        changes.append(f"security group {group.id} added to port {port.id}")
    for port in api.ports_with_security_group(group.id):
        if port.id not in member_ports:
            _take_off(api, port, group.id)
            changes.append(f"security group {group.id} taken off port {port.id}")
    return changes, problems


def remove_security_groups(api: SecurityGroupAPI, name: str, uid: str) -> list[str]:
    """Take our groups named ``name`` off every port and delete them."""
    done: list[str] = []
    for group in api.find_security_groups(name):
        if not is_ours(group.description, uid):
            continue
        for port in api.ports_with_security_group(group.id):
            _take_off(api, port, group.id)
        api.delete_security_group(group.id)
        done.append(f"deleted security group {group.id}")
    return done


def _take_off(api: SecurityGroupAPI, port: PortRecord, group_id: str) -> None:
    api.set_port_security_groups(port.id, tuple(g for g in port.security_groups if g != group_id), port.revision)
