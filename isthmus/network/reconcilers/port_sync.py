"""``port_sync``: central ports, everywhere. Event-driven, incremental, batched.

Central's driver queues it, keyed by port, when a user changes a port there,
when a region reports the port bound, unbound or moved, and when the port is
deleted. It is a batch type (docs/jobs.md, Batch handlers): the ports of a burst
(a deployment's servers booting) are one run, so per network and region one
list call (by network and MACs, answered from the region's own database), one
bulk create of the shadows, and a write per changed copy; its work follows the
ports that changed, never the size of the network. Where every port of the
batch is newly bound elsewhere, the bulk create goes first and the list only
follows Neutron's refusal (a copy or shadow there already). A port's first bind
(central's hint, ``jobtypes.fresh_bind_hint``) costs nothing in its own region:
the local plugin made it there from central a moment ago.

What the handler keeps:

* the regional copy shows central's user-settable fields (a security change
  that never reaches the enforcing region is a security hole);
* every region that has ports of its own on the network holds a shadow of the
  port where it is bound elsewhere, remade when its MAC, addresses or host moved;
* copies and shadows go when central recorded the port's delete.

One port's failure is that port's job's failure: the others of the batch carry
on. ``network_sync`` plans whole networks: on first use of a network in a
region, on network and subnet changes, and periodically, as the backstop; both
carry out their plans with :class:`PortWriter`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from isthmus.clients import NeutronClient, Rejected, Unavailable
from isthmus.jobs import Batch, JobContext, RetryLater, Stopped
from isthmus.network import bound_region, copies, jobtypes
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.fanout import in_every_region
from isthmus.network.reconcilers.ovn import wiring as ovn_wiring
from isthmus.network.reconcilers.ovn.access import OvnAccess
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.shadows import ShadowPolicy
from isthmus.network.reconcilers.topology import Topology
from isthmus.network.reconcilers.writes import delete_as_read, update_as_read
from isthmus.registry import Registry, Tombstones

LOG = logging.getLogger(__name__)
CHUNK = 100  # ids or MACs per list call: a URL well under any proxy's limit


@dataclass
class PortWork:
    """One job of the batch: its port as central has it (None: gone) and where
    its copies may be."""

    ctx: JobContext
    network_id: str
    macs: set[str]
    central: dict | None
    deleted: bool

    @property
    def port_id(self) -> str:
        return self.ctx.resource_id

    def fresh_in(self, region: str) -> bool:
        """Just bound in ``region`` for the first time (its events said so) and
        still bound there: the region holds it as the local plugin made it."""
        return (self.ctx.hinted(jobtypes.fresh_bind_hint(region)) and self.central is not None
                and bound_region(self.central) == region)


@dataclass
class Failures:
    """Per-port refusals from the regions (thread-safe enough: one list append per item)."""

    by_port: dict[str, list[str]] = field(default_factory=dict)
    first: Exception | None = None  # as raised: a caller without per-port jobs raises it

    def add(self, port_id: str, region: str, err: Exception) -> None:
        self.by_port.setdefault(port_id, []).append(f"{region}: {err}")
        self.first = self.first or err


@dataclass(frozen=True)
class PortSync:
    """The ``port_sync`` handler (a batch of port jobs)."""

    regions: Regions
    topology: Topology
    tombstones: Tombstones
    shadows: ShadowPolicy
    ovn: OvnAccess
    writer: PortWriter

    def run(self, batch: Batch) -> None:
        live = batch.live()
        try:
            found = central_ports(self.regions.central, [ctx.resource_id for ctx in live])
        except Unavailable as err:
            raise RetryLater(f"central: {err}") from err
        by_network: dict[str, list[PortWork]] = {}
        for ctx in live:
            work = port_work(self.tombstones, ctx, found.get(ctx.resource_id))
            if work is not None:
                by_network.setdefault(work.network_id, []).append(work)
        for network_id, works in sorted(by_network.items()):
            try:
                failures = self.sync_network_ports(network_id, works)
            except Stopped:
                raise  # the whole run ends (deadline, shutdown): every unmarked job is stopped
            except Exception as err:  # noqa: BLE001 - this network's jobs get its outcome, the others go on
                for work in works:
                    batch.raised(work.ctx, err)
                continue
            for work in works:
                if work.port_id in failures.by_port:
                    batch.fail(work.ctx, "; ".join(failures.by_port[work.port_id]))

    def sync_network_ports(self, network_id: str, works: list[PortWork]) -> Failures:
        """The batch's ports of one network in every region."""
        try:
            shadows = self.shadows.network_wants_shadows(network_id)
        except Unavailable as err:
            raise RetryLater(f"central: {err}") from err
        routed = self.topology.routed_regions(network_id)
        regions = self.topology.regions()
        hypervisors = self.ovn.hypervisors()
        originals = {w.port_id: w.central for w in works if w.central is not None}
        failures = Failures()

        def sync_region(region: str) -> None:
            neutron = self.regions.neutron(region)
            binds = shadows and self.shadows.binds_shadows(region)
            # A port's first bind costs nothing in its own region: most of a burst's
            # events need only their shadows elsewhere.
            todo = [w for w in works if not w.fresh_in(region)]
            if todo and not _made_as_new(neutron, self.writer, region, todo, binds, region in routed):
                _converge_region(neutron, region, binds, todo)
            ovn = self.ovn.region(region)
            if ovn is not None and shadows and self.ovn.keys is not None:
                ovn_wiring.sync_ports(ovn, network_id, [w.central for w in works if w.central is not None],
                                      [w.port_id for w in works if w.deleted], self.ovn.keys, hypervisors)

        def _converge_region(neutron: NeutronClient, region: str, binds: bool, todo: list[PortWork]) -> None:
            """Read the region's copies of these ports, then plan and apply."""
            copies = _copies(neutron, network_id, todo)
            creates: list[tuple[str, dict]] = []
            for work in todo:
                mine = copies.get(work.port_id, [])
                plan = plans.plan_port(region, work.central, mine, shadows=binds, local_members=region in routed,
                                       deleted=work.deleted)
                try:
                    self.writer.apply(neutron, region, plans.PortPlan(delete=plan.delete), originals, mine)
                except Rejected as err:
                    failures.add(work.port_id, region, err)
                creates += [(work.port_id, body) for body in plan.create_shadows]
            self.writer.route_groups(region, [body for _, body in creates])
            create_shadows(neutron, region, creates, failures)

        in_every_region(regions, sync_region, f"ports of {network_id}")
        if self.ovn.regions and self.ovn.keys is not None:
            for work in works:
                if work.deleted and work.port_id not in failures.by_port:
                    # Every region dropped its remote port (a failed region raised above): the
                    # key may serve another port now without two ports sharing it anywhere.
                    self.ovn.keys.release_port(network_id, work.port_id)
        return failures


def central_ports(central: NeutronClient, port_ids: list[str]) -> dict[str, dict]:
    """Central's ports by id, a list call per ``CHUNK`` ids."""
    found: dict[str, dict] = {}
    for start in range(0, len(port_ids), CHUNK):
        for port in central.list("ports", id=port_ids[start:start + CHUNK]):
            found[port["id"]] = port
    return found


def port_work(tombstones: Tombstones, ctx: JobContext, central: dict | None) -> PortWork | None:
    """What the job asks for, or None when there is nothing to prove anything:
    central lacks the port and recorded no delete (a filtered or partial read
    looks the same as a delete)."""
    port_id = ctx.resource_id
    network_id = central["network_id"] if central else ctx.payload.get("network_id")
    macs = set(ctx.payload.get("macs") or []) | ({central["mac_address"]} if central else set())
    deleted = central is None and tombstones.is_buried("port", port_id)
    if not network_id or not macs or (central is None and not deleted):
        return None
    return PortWork(ctx, network_id, macs, central, deleted)


def _made_as_new(neutron: NeutronClient, writer: PortWriter, region: str, works: list[PortWork], binds: bool,
                 routed: bool) -> bool:
    """The common burst (ports newly bound elsewhere, each wanting a shadow here)
    without reading the region first: the plan for a region that holds nothing of
    these ports is their shadows, so create them; Neutron refuses a port whose MAC
    (or address, or id) a copy or shadow already holds, with a 409 for the whole
    bulk POST. True when the bulk creates were all taken; False (nothing else
    done, or part of it) sends the caller to read and converge, which finishes it."""
    creates: list[tuple[str, dict]] = []
    for work in works:
        if work.central is None or work.deleted or work.macs != {work.central["mac_address"]} \
                or bound_region(work.central) in (None, region):
            return False  # a delete, a MAC change, an unbind, or its own region: read first
        plan = plans.plan_port(region, work.central, [], shadows=binds, local_members=routed, deleted=False)
        if not plan.create_shadows:
            return False
        creates += [(work.port_id, body) for body in plan.create_shadows]
    writer.route_groups(region, [body for _, body in creates])
    for chunk, refused in _bulk_creates(neutron, region, creates):
        if refused is not None:
            LOG.info("%d new shadow(s) in %s refused (%s): reading the region", len(chunk), region, refused)
            return False
    return True


def _copies(neutron: NeutronClient, network_id: str, works: list[PortWork]) -> dict[str, list[dict]]:
    """The region's ports with the batch's ids: port id -> its copy or shadow (one,
    rarely two). By network and MAC: a filter by id would make the local plugin
    copy the port, which is not ours to do."""
    wanted = {w.port_id for w in works}
    macs = sorted({m for w in works for m in w.macs})
    found: dict[str, dict] = {}
    for start in range(0, len(macs), CHUNK):
        for port in neutron.list("ports", network_id=network_id, mac_address=macs[start:start + CHUNK]):
            if port["id"] in wanted:
                found[port["id"] + port.get("device_owner", "")] = port
    by_port: dict[str, list[dict]] = {}
    for port in found.values():
        by_port.setdefault(port["id"], []).append(port)
    return by_port


def _bulk_creates(neutron: NeutronClient, region: str, creates: list[tuple[str, dict]]
                  ) -> Iterator[tuple[list[tuple[str, dict]], Rejected | None]]:
    """Shadows (port id, body) made a bulk create per ``CHUNK``: each chunk with
    Neutron's refusal, all or nothing (None: all made). The caller decides what a
    refusal means; stopping the iteration stops the creates."""
    for start in range(0, len(creates), CHUNK):
        chunk = creates[start:start + CHUNK]
        LOG.info("%d shadow(s) in %s: %s", len(chunk), region, ", ".join(port_id for port_id, _ in chunk))
        try:
            neutron.create_many("ports", [body for _, body in chunk])
        except Rejected as err:
            yield chunk, err
            continue
        yield chunk, None


def create_shadows(neutron: NeutronClient, region: str, creates: list[tuple[str, dict]], failures: Failures) -> None:
    """One bulk create per ``CHUNK``; a chunk Neutron refuses (all or nothing: one
    shadow made meanwhile refuses the lot) goes one by one, so one port's refusal
    is that port's alone."""
    for chunk, refused in _bulk_creates(neutron, region, creates):
        if refused is None or (len(chunk) == 1 and refused.status == 409):
            continue  # made; or (409) created concurrently, converged
        LOG.info("bulk shadow create in %s refused (%s); one by one", region, refused)
        for port_id, body in chunk:
            try:
                neutron.create("ports", body)
            except Rejected as err:
                if err.status != 409:  # 409: created concurrently, converged
                    failures.add(port_id, region, err)


@dataclass(frozen=True)
class PortWriter:
    """Carries out a port plan in one region (port_sync's and network_sync's):
    deletes only what central still says is elsewhere, updates copies to central's
    fields (a security group new to the region is copied and routed), makes shadows."""

    regions: Regions  # central's word, read again before a copy goes
    registry: Registry  # routings of the security groups a copy or shadow brings into a region
    routed: set[tuple[str, str]] = field(default_factory=set)  # (region, group) routed by this worker

    def apply(self, neutron: NeutronClient, region: str, plan: plans.PortPlan, central: Mapping[str, dict],
              regional: list[dict]) -> None:
        """``central`` by id, ``regional`` the region's ports the plan was made from."""
        by_id = {p["id"]: p for p in regional}
        for port_id in plan.delete:
            original = central.get(port_id)
            # Deleting a regional compute port deletes it at central too (local
            # plugin) where central says it lives: never do that to a live port.
            if plans.is_compute(by_id[port_id]) and original is not None and bound_region(original) == region:
                continue
            if not plans.is_shadow(by_id[port_id]) and original is not None \
                    and not self._still_elsewhere(port_id, region):
                # Planned as the stale copy of a port bound elsewhere, from a read that may be
                # old. The local plugin keeps this worker's deletes in the region (and the
                # delete is conditional on the copy's revision); this re-read is the second
                # guard, for a deployment whose worker and local plugin are different users.
                LOG.info("port %s in %s: no longer bound elsewhere at central; copy kept", port_id, region)
                continue
            LOG.info("port %s in %s: deleting %s", port_id, region,
                     "shadow" if plans.is_shadow(by_id[port_id]) else "copy")
            delete_as_read(neutron, "ports", by_id[port_id])
        for port in regional:
            original = central.get(port["id"])
            if original is None or port["id"] in plan.delete \
                    or (port.get("device_owner") or "").startswith("network:"):
                continue
            if plans.is_shadow(port):
                self.update_shadow(neutron, region, port, original)
            else:
                self.update_copy(neutron, region, port, original)
        failures = Failures()
        self.route_groups(region, plan.create_shadows)
        create_shadows(neutron, region, [(plans.shadow_of(body) or "", body) for body in plan.create_shadows],
                       failures)
        if failures.by_port:
            raise failures.first or RuntimeError(f"shadows in {region} refused")

    def _still_elsewhere(self, port_id: str, region: str) -> bool:
        """Central's current word: the port is bound in a region other than ``region``."""
        now = self.regions.central.get("ports", port_id)
        return now is not None and bound_region(now) not in (None, region)

    def update_copy(self, neutron: NeutronClient, region: str, copy: dict, central: dict) -> None:
        changes = copies.port_changes(central, copy)
        if not changes:
            return
        self._bring_groups(neutron, region, central, copy)
        LOG.info("port %s in %s: updating %s", central["id"], region, sorted(changes))
        update_as_read(neutron, "ports", copy, changes)

    def update_shadow(self, neutron: NeutronClient, region: str, shadow: dict, central: dict) -> None:
        """A shadow's security groups follow its port's (the region counts it a member)."""
        changes = plans.shadow_security_changes(shadow, central)
        if not changes:
            return
        self._bring_groups(neutron, region, central, shadow)
        LOG.info("shadow %s in %s: security groups %s", central["id"], region, changes["security_groups"])
        update_as_read(neutron, "ports", shadow, changes)

    def _bring_groups(self, neutron: NeutronClient, region: str, central: dict, regional: dict) -> None:
        """The groups of ``central`` that ``regional`` lacks: a GET copies each to the
        region (with its rules), and the routing makes security_group_sync keep it
        (later edits, central's delete)."""
        new = set(central.get("security_groups") or []) - set(regional.get("security_groups") or [])
        for group_id in sorted(new):
            neutron.get("security-groups", group_id)
        self._route(region, central["project_id"], new)

    def route_groups(self, region: str, shadows: list[dict]) -> None:
        """Routings for the groups new shadows carry (the local plugin copies the
        groups themselves as it makes the shadows)."""
        for body in shadows:
            self._route(region, body["project_id"], body.get("security_groups") or [])

    def _route(self, region: str, project_id: str, group_ids: Iterable[str]) -> None:
        todo = [g for g in group_ids if (region, g) not in self.routed]
        pod = self.registry.find_pod(region) if todo else None
        if pod is None:
            return
        for group_id in todo:
            self.registry.ensure_routing(group_id, group_id, pod.pod_id, project_id, "security_group")
            self.routed.add((region, group_id))  # a hint: a routing is removed only with its group
