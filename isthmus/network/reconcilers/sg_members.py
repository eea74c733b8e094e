"""Remote-group members in regional address groups (see :mod:`address_groups`).

Two entry points share the helpers here:

* ``security_group_sync`` (project, full, periodic backstop) wires every routed
  group copy with :func:`wire_group` and fills its address groups by diff;
* ``sg_member_sync`` (:class:`SgMemberSync`, keyed ``<group>#<address>``) is what a
  port event queues, one job per (group, address) pair the event may have
  changed. A batch type: the pairs of a burst are one run, which per group reads
  central's ports holding its addresses (one filtered list) and, in each region,
  adds or removes those addresses in that one address group (one call each
  way), so its work follows the pairs and does not grow with the group's size. Keyed by pair and not
  by port: the job must also undo a deleted port or an old address, which
  central no longer knows, and a pair is a level (its job recomputes it from
  central whatever the events that queued it), so coalescing loses nothing.
  In the region where the member is bound it also wires the group's copy there
  (companion rules, address groups made and filled on first arrival).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from isthmus.clients import NeutronClient, Rejected, Unavailable
from isthmus.jobs import Batch, JobContext, RetryLater, Stopped
from isthmus.network import bound_region, members
from isthmus.network.reconcilers import address_groups as ag
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.fanout import in_every_region
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.shadows import ShadowPolicy, ShadowReach
from isthmus.network.reconcilers.topology import Topology

LOG = logging.getLogger(__name__)
COLLECTION = "address-groups"
_BULK = 100
_ATTEMPTS = 3


class Members:
    """Central's view of groups and their members, read at most once per job;
    ``carried`` says where a member's shadow makes the region count it itself."""

    def __init__(self, central: NeutronClient, groups: Mapping[str, dict] | None = None,
                 carried: ag.Carried = lambda port, region: False) -> None:
        self.central = central
        self.carried = carried
        self._groups: dict[str, dict | None] = dict(groups or {})
        self._ports: dict[str, list[dict]] = {}

    def desired(self, group_id: str, region: str, ports: list[dict] | None = None) -> set[str]:
        """What the group's address group holds in ``region`` (:func:`ag.desired_addresses`)."""
        return ag.desired_addresses(group_id, region, self.ports(group_id) if ports is None else ports,
                                    self.carried)

    def group(self, group_id: str) -> dict | None:
        if group_id not in self._groups:
            self._groups[group_id] = self.central.get("security-groups", group_id)
        return self._groups[group_id]

    def ports(self, group_id: str) -> list[dict]:
        """The group's ports, in every project (a shared group has members elsewhere)."""
        if group_id not in self._ports:
            self._ports[group_id] = [p for p in self.central.list("ports", security_groups=group_id)
                                     if group_id in (p.get("security_groups") or [])]
        return self._ports[group_id]


# ------------------------------------------------------------------ address groups in a region
def find(neutron: NeutronClient, groups: Iterable[dict]) -> dict[str, tuple[dict | None, list[dict]]]:
    """group id -> (its address group in the region or None, duplicates); one list call."""
    by_id = {g["id"]: g for g in groups}
    if not by_id:
        return {}
    found = neutron.list(COLLECTION, name=[ag.name_of(g) for g in sorted(by_id)])
    return {gid: ag.choose(found, group) for gid, group in by_id.items()}


def create(neutron: NeutronClient, group: dict, addresses: set[str]) -> dict:
    """Made as the group owner's, filled at once. Two workers racing to make it
    both keep the lowest id; the loser removes its own (nothing refers to it yet)."""
    made = neutron.create(COLLECTION, ag.body(group, addresses))
    chosen, _ = ag.choose(neutron.list(COLLECTION, name=ag.name_of(group["id"]), project_id=group["project_id"]),
                          group)
    if chosen is not None and chosen["id"] != made["id"]:
        neutron.delete(COLLECTION, made["id"])
        return chosen
    LOG.info("address group %s in %s: made with %d addresses", made["id"], neutron.region, len(addresses))
    return made


def converge(neutron: NeutronClient, address_group: dict, want: Callable[[set[str]], set[str]]) -> ag.AddressDiff:
    """Make the address group hold ``want(have)``: at most one add_addresses and
    one remove_addresses call (in chunks). Neutron refuses an add of an address
    present or a removal of one absent: someone changed it meanwhile, so read it
    again and recompute."""
    current = address_group
    for _ in range(_ATTEMPTS):
        have = {members.cidr(a) for a in current.get("addresses") or []}
        change = ag.diff(want(have), have)
        try:
            for action, addresses in (("add_addresses", change.add), ("remove_addresses", change.remove)):
                if not _change_addresses(neutron, current["id"], action, addresses):
                    raise _Changed()
            if change:
                LOG.info("address group %s in %s: +%d -%d", current["id"], neutron.region,
                         len(change.add), len(change.remove))
            return change
        except Rejected as err:
            if err.status != 400:
                raise
        except _Changed:
            pass
        fresh = neutron.get(COLLECTION, current["id"])
        if fresh is None:
            raise Unavailable(f"{neutron.region}: address group {address_group['id']} deleted meanwhile")
        current = fresh
    raise Unavailable(f"{neutron.region}: address group {address_group['id']} keeps changing")


class _Changed(Exception):
    pass


def _change_addresses(neutron: NeutronClient, address_group_id: str, action: str, addresses: list[str]) -> bool:
    """``add_addresses`` or ``remove_addresses``, a call per ``_BULK`` addresses;
    False when Neutron answers 404 (the group gone, or an address to remove
    absent): the chunks before it are done, the rest not tried."""
    for start in range(0, len(addresses), _BULK):
        if neutron.action(COLLECTION, address_group_id, action, {"addresses": addresses[start:start + _BULK]}) is None:
            return False
    return True


def wire_group(neutron: NeutronClient, region: str, central_group: dict, copy: dict, members: Members,
               fill: bool) -> dict[str, dict]:
    """One group's copy in a region: an address group for each group its rules
    name as remote (made and filled if missing; refilled by diff when ``fill``),
    then its rules (central's plus companions, legacy /32 member rules removed).
    Returns the address groups, by the remote group they stand for."""
    rules = [r for r in central_group.get("security_group_rules") or [] if not r.get("remote_address_group_id")]
    remotes = [g for g in (members.group(s) for s in sorted(ag.remote_groups(rules))) if g is not None]
    ids: dict[str, str] = {}
    chosen: dict[str, dict] = {}
    duplicates: list[dict] = []
    for group_id, (address_group, extra) in find(neutron, remotes).items():
        if address_group is None:
            group = members.group(group_id)
            assert group is not None  # one of the remotes, all found
            address_group = create(neutron, group, members.desired(group_id, region))
        elif fill:
            converge(neutron, address_group, functools.partial(_filled, group_id, region, members=members))
        ids[group_id] = address_group["id"]
        chosen[group_id] = address_group
        duplicates += extra
    plan = plans.plan_rules(central_group["id"], plans.desired_rules(central_group, ids),
                            copy.get("security_group_rules") or [])
    for rule_id in plan.delete:
        neutron.delete("security-group-rules", rule_id)
    create_rules(neutron, plan.create)
    if plan.delete or plan.create:
        LOG.info("security group %s in %s: -%d +%d rules", central_group["id"], region, len(plan.delete),
                 len(plan.create))
    for duplicate in duplicates:
        delete_unused(neutron, duplicate["id"])
    return chosen


def _filled(group_id: str, region: str, have: set[str], members: Members) -> set[str]:
    """What a full pass wants in the address group. Its members were read at the
    start of the pass; an address it would remove is checked against a fresh
    read first (a member may have bound since, and its own sg_member_sync has
    already run): removal only on a present answer, never on a snapshot."""
    ports = members.ports(group_id)
    # An entry for a member the region shadows stays while the member does: it admits
    # nothing its shadow does not (and a shadow made before shadows carried groups
    # gets them only with its network's next pass).
    desired = members.desired(group_id, region) | (have & ag.desired_addresses(group_id, region, ports))
    stale = have - desired
    if stale:
        fresh = Members(members.central).ports(group_id)
        desired |= stale & members.desired(group_id, region, fresh)
    return desired


def delete_unused(neutron: NeutronClient, address_group_id: str) -> bool:
    """Delete an address group unless a rule still names it (Neutron's 409)."""
    try:
        return neutron.delete(COLLECTION, address_group_id)
    except Rejected as err:
        if err.status == 409:
            return False
        raise


def create_rules(neutron: NeutronClient, rules: list[dict]) -> None:
    """In bulk; a chunk refused for a rule that exists already goes one by one.
    A 404 (an address group deleted meanwhile by a concurrent cleanup) retries."""
    for start in range(0, len(rules), _BULK):
        chunk = rules[start:start + _BULK]
        try:
            neutron.create_many("security-group-rules", chunk)
            continue
        except Rejected as err:
            if err.status == 404:
                raise Unavailable(f"{neutron.region}: {err}") from err
            if err.status != 409:
                raise
        for rule in chunk:
            try:
                neutron.create("security-group-rules", rule)
            except Rejected as err:
                if err.status == 404:
                    raise Unavailable(f"{neutron.region}: {err}") from err
                if err.status != 409:  # 409: created concurrently, converged
                    raise


# ------------------------------------------------------------------ sg_member_sync
@dataclass(frozen=True)
class SgMemberSync:
    """The ``sg_member_sync`` handler (a batch of (group, address) pairs)."""

    regions: Regions
    topology: Topology
    shadows: ShadowPolicy  # where a member's shadow carries its groups: nothing to add there
    known: ag.KnownAddressGroups  # this worker's hints: address group ids, copies wired

    def run(self, batch: Batch) -> None:
        """Per group, one read of central and per region one address-group change,
        whatever the number of its pairs here."""
        by_group: dict[str, dict[str, list[JobContext]]] = {}
        for ctx in batch.live():
            group_id, _, address = ctx.resource_id.partition("#")
            by_group.setdefault(group_id, {}).setdefault(members.cidr(address), []).append(ctx)
        for group_id, pairs in sorted(by_group.items()):
            try:
                self.sync_addresses(group_id, sorted(pairs))
            except Stopped:
                raise  # the whole run ends (deadline, shutdown): every unmarked job is stopped
            except Exception as err:  # noqa: BLE001 - this group's jobs get its outcome, the others go on
                for ctx in (c for contexts in pairs.values() for c in contexts):
                    batch.raised(ctx, err)

    def sync_pair(self, group_id: str, address: str) -> None:
        """One (group, address) pair in every region (:meth:`sync_addresses` of one)."""
        self.sync_addresses(group_id, [members.cidr(address)])

    def sync_addresses(self, group_id: str, addresses: list[str]) -> None:
        """Some of a group's addresses in every region: an address is in the group's
        address group in region X iff a member of the group holding it is bound in a
        region other than X and has no shadow in X (which X counts itself)."""
        central = self.regions.central
        reach = ShadowReach(self.shadows, self.topology)
        try:
            group = central.get("security-groups", group_id)
            if group is None:
                return  # deleted: security_group_sync removes what was made for it
            holders = _holders(central, group_id, addresses)
            for port in (p for found in holders.values() for p in found):
                reach.regions(port["network_id"])  # central asked here, not once per region below
        except Unavailable as err:
            raise RetryLater(f"central: {err}") from err
        members = Members(central, {group_id: group}, reach.carries)
        in_every_region(self.topology.regions(),
                        lambda region: self._in_region(region, group, addresses, holders, members),
                        f"members of {group_id}")

    def _in_region(self, region: str, group: dict, addresses: list[str], holders: Mapping[str, list[dict]],
                   members: Members) -> None:
        neutron = self.regions.neutron(region)
        known = self.known
        present = {a for a in addresses
                   if any(bound_region(p) != region and not members.carried(p, region) for p in holders[a])}
        # Held only by members bound here or shadowed here: the region counts them
        # itself (the group's own remote-group rule admits them), so the address group
        # may keep such an address (left from when it admitted it) without admitting
        # anything more; the full pass (security_group_sync) takes it out. So a
        # member's own region, and every region its network reaches with shadows,
        # costs its event no request.
        counted_here = {a for a in addresses if holders[a]} - present
        absent = set(addresses) - present - counted_here
        where = {a: {bound_region(p) for p in holders[a]} for a in addresses}
        wired: dict[str, dict] = {}
        if any(region in regions for regions in where.values()) and not known.is_wired(region, group):
            # A member bound here: the group's copy here must be wired (its first
            # member here makes its address groups and companion rules). Once per
            # worker and rule set: security_group_sync repairs what changes later.
            copy = neutron.get("security-groups", group["id"])  # a GET copies it if missing
            if copy is not None:
                wired = wire_group(neutron, region, group, copy, members, fill=False)
                for remote, made in wired.items():
                    known.remember(region, remote, made["id"])
                known.wired(region, group)
        if not absent and (not present or (group["id"] not in wired
                                           and _add_known(neutron, known, region, group["id"], sorted(present)))):
            return
        # Removals always read first: an address is taken out only when it is there.
        address_group: dict | None = wired.get(group["id"]) or find(neutron, [group])[group["id"]][0]
        if address_group is None:
            known.forget(region, group["id"])
            return  # no rule here names the group: nothing to admit
        known.remember(region, group["id"], address_group["id"])
        converge(neutron, address_group, lambda have: (have | present) - absent)


def _holders(central: NeutronClient, group_id: str, addresses: list[str]) -> dict[str, list[dict]]:
    """address -> central's members of the group holding it: one list call per
    ``_BULK`` addresses (Neutron matches any of the ``fixed_ips`` filters given)."""
    found: dict[str, list[dict]] = {a: [] for a in addresses}
    for start in range(0, len(addresses), _BULK):
        chunk = addresses[start:start + _BULK]
        ips = [f"ip_address={ipaddress.ip_network(a).network_address}" for a in chunk]
        for port in central.list("ports", fixed_ips=ips if len(ips) > 1 else ips[0]):
            if members.is_member(port, group_id):
                for address in members.addresses_of(port) & set(chunk):
                    found[address].append(port)
    return found


def _add_known(neutron: NeutronClient, known: ag.KnownAddressGroups, region: str, group_id: str,
               addresses: list[str]) -> bool:
    """Add to the address group this worker knows, without reading it first;
    False when it knows none or Neutron refuses (the group gone: 404; an address
    there already: 400): the caller then reads and converges."""
    address_group_id = known.id_of(region, group_id)
    if address_group_id is None:
        return False
    try:
        if not _change_addresses(neutron, address_group_id, "add_addresses", addresses):
            known.forget(region, group_id)
            return False
    except Rejected as err:
        if err.status != 400:
            raise
        return False
    LOG.info("address group %s in %s: +%d", address_group_id, region, len(addresses))
    return True
