"""``security_group_sync``: make a project's security groups converge in every
region that holds copies: central's rules, and for each remote-group rule an
address group of the remote group's members bound in other regions and not
shadowed there, with one companion rule naming it (each region only counts its
own ports and shadows as members; see :mod:`address_groups`). Full and
level-triggered: the periodic backstop of the per-pair ``sg_member_sync``; it
also removes the /32 member rules of the previous release and address groups
nothing names any more."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from isthmus.clients import NeutronClient, Rejected, Unavailable
from isthmus.jobs import JobContext, PermanentFailure, RetryLater
from isthmus.network.reconcilers import address_groups, plans, sg_members
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.shadows import ShadowPolicy, ShadowReach
from isthmus.network.reconcilers.topology import Topology
from isthmus.registry import Registry, Tombstones

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class SecurityGroupSync:
    """The ``security_group_sync`` handler (keyed by project)."""

    regions: Regions
    registry: Registry  # the project's security group routings: which regions hold copies
    topology: Topology
    tombstones: Tombstones
    shadows: ShadowPolicy  # members a region counts itself, by their shadows there

    def run(self, ctx: JobContext) -> None:
        project_id = ctx.resource_id
        central = self.regions.central
        try:
            groups = central.list("security-groups", project_id=project_id)
        except Unavailable as err:
            raise RetryLater(f"central: {err}") from err
        routings = self.registry.list_routings({"project_id": project_id, "resource_type": "security_group"})
        try:
            # Groups the project's ports use but another project owns (shared by RBAC)
            # are not in the project's list: read them by id, never take them for deleted.
            groups += _foreign_groups(central, {r.top_id for r in routings} - {g["id"] for g in groups})
        except Unavailable as err:
            raise RetryLater(f"central: {err}") from err
        by_id = {g["id"]: g for g in groups}
        deleted = self.tombstones.buried("security_group", {r.top_id for r in routings} - set(by_id))
        members = sg_members.Members(central, by_id, ShadowReach(self.shadows, self.topology).carries)
        unreachable: list[str] = []
        wired: dict[str, set[str]] = {}  # region -> remote groups its routed copies name
        for routing in routings:
            region = self.topology.region_of_pod(routing.pod_id)
            if region is None:
                continue
            neutron = self.regions.neutron(region)
            try:
                if routing.top_id not in by_id:
                    if routing.top_id in deleted:  # central's recorded delete: proof
                        neutron.delete("security-groups", routing.top_id)
                        self.registry.delete_routing(routing.id)
                    else:
                        LOG.warning("security group %s: not at central, no delete recorded; copy in %s kept",
                                    routing.top_id, region)
                    continue
                group = by_id[routing.top_id]
                copy = neutron.get("security-groups", group["id"])  # a GET re-copies a lost group
                if copy is None:
                    continue
                sg_members.wire_group(neutron, region, group, copy, members, fill=True)
                wired.setdefault(region, set()).update(
                    address_groups.remote_groups(plans.desired_rules(group, {})))
            except Unavailable as err:
                LOG.warning("security groups of %s: %s; will retry", project_id, err)
                unreachable.append(region)
            except Rejected as err:
                if err.status == 409:  # a group still in use there: try again later
                    unreachable.append(region)
                    continue
                raise PermanentFailure(f"{region}: {err}") from err
        routed = {found for r in routings if (found := self.topology.region_of_pod(r.pod_id)) is not None}
        for region in sorted(routed - set(unreachable)):
            try:
                _remove_unused(self.regions.neutron(region), project_id, wired.get(region, set()))
            except Unavailable as err:
                LOG.warning("address groups of %s in %s: %s; will retry", project_id, region, err)
                unreachable.append(region)
        if unreachable:
            raise RetryLater(f"regions not done: {', '.join(sorted(set(unreachable)))}")


def _remove_unused(neutron: NeutronClient, project_id: str, named: set[str]) -> None:
    """The project's Isthmus address groups for groups no routed copy here names
    any more (a rule deleted, a group deleted); one still named by another
    project's rule (a shared group) is kept: Neutron refuses with 409."""
    for found in neutron.list(sg_members.COLLECTION, project_id=project_id):
        group_id = address_groups.group_of(found.get("name"))
        if group_id is not None and group_id not in named:
            if sg_members.delete_unused(neutron, found["id"]):
                LOG.info("address group %s (%s) in %s: unused, deleted", found["id"], group_id, neutron.region)


def _foreign_groups(central: NeutronClient, ids: set[str]) -> list[dict]:
    return [g for g in (central.get("security-groups", i) for i in sorted(ids)) if g is not None]
