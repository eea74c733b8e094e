"""``security_group_sync``: make a project's security groups converge in every
region that holds copies, including rules admitting remote-group members bound
in other regions (each region only sees its own ports as members)."""

from __future__ import annotations

import logging

from isthmus.clients import NeutronClient, Rejected, Unavailable
from isthmus.jobs import JobContext, PermanentFailure, RetryLater
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.services import Services

LOG = logging.getLogger(__name__)


def sync_security_groups(services: Services, ctx: JobContext) -> None:
    project_id = ctx.resource_id
    try:
        groups = services.central.list("security-groups", project_id=project_id)
        ports = services.central.list("ports", project_id=project_id)
    except Unavailable as err:
        raise RetryLater(f"central: {err}") from err
    routings = services.registry.list_routings({"project_id": project_id, "resource_type": "security_group"})
    try:
        # Groups the project's ports use but another project owns (shared by RBAC)
        # are not in the project's list: read them by id, never take them for deleted.
        groups += _foreign_groups(services.central, {r.top_id for r in routings} - {g["id"] for g in groups})
    except Unavailable as err:
        raise RetryLater(f"central: {err}") from err
    by_id = {g["id"]: g for g in groups}
    deleted = services.tombstones.buried("security_group", {r.top_id for r in routings} - set(by_id))
    unreachable: list[str] = []
    for routing in routings:
        region = services.region_of_pod(routing.pod_id)
        if region is None:
            continue
        neutron = services.neutron(region)
        try:
            if routing.top_id not in by_id:
                if routing.top_id in deleted:  # central's recorded delete: proof
                    neutron.delete("security-groups", routing.top_id)
                    services.registry.delete_routing(routing.id)
                else:
                    LOG.warning("security group %s: not at central, no delete recorded; copy in %s kept",
                                routing.top_id, region)
                continue
            group = by_id[routing.top_id]
            copy = neutron.get("security-groups", group["id"])  # a GET re-copies a lost group
            if copy is None:
                continue
            plan = plans.plan_rules(group["id"], plans.desired_rules(group, region, ports),
                                    copy.get("security_group_rules") or [])
            for rule_id in plan.delete:
                neutron.delete("security-group-rules", rule_id)
            _create_rules(neutron, plan.create)
            if plan.delete or plan.create:
                LOG.info("security group %s in %s: -%d +%d rules", group["id"], region, len(plan.delete), len(plan.create))
        except Unavailable as err:
            LOG.warning("security groups of %s: %s; will retry", project_id, err)
            unreachable.append(region)
        except Rejected as err:
            if err.status == 409:  # a group still in use there: try again later
                unreachable.append(region)
                continue
            raise PermanentFailure(f"{region}: {err}") from err
    if unreachable:
        raise RetryLater(f"regions not done: {', '.join(sorted(set(unreachable)))}")


_BULK = 100


def _foreign_groups(central: NeutronClient, ids: set[str]) -> list[dict]:
    return [g for g in (central.get("security-groups", i) for i in sorted(ids)) if g is not None]


def _create_rules(neutron: NeutronClient, rules: list[dict]) -> None:
    """In bulk (a default group admits every remote member: hundreds of rules at
    once); a chunk refused for a rule that exists already goes one by one."""
    for start in range(0, len(rules), _BULK):
        chunk = rules[start:start + _BULK]
        try:
            neutron.create_many("security-group-rules", chunk)
            continue
        except Rejected as err:
            if err.status != 409:
                raise
        for rule in chunk:
            try:
                neutron.create("security-group-rules", rule)
            except Rejected as err:
                if err.status != 409:  # 409: created concurrently, converged
                    raise
