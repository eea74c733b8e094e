"""Upgrades: a new ``spec.version`` on a MultiRegionCloud reaches its children one at a time.

The rule (docs/operator.md, "Upgrades"):

1. Keystone first: every service authenticates against it.
2. Central networking next: its schema Jobs migrate the Isthmus database and
   central Neutron's. Isthmus' migrations only add (older code runs on a newer
   schema: ``isthmus.db.migration.require_current`` accepts "ahead"), and
   central's REST API keeps serving older local plugins, so a new central
   serves old regions, not the other way round.
3. The regions, one at a time, in the order of ``spec.regions``.
4. The API gateway last: it reads every region.

A child is *done* when its ``status.deployedVersion`` is the target (its schema
Jobs for that version succeeded and its Deployments rolled out and are Ready;
each child sets it). The first child not done is being upgraded; every child
after it keeps the version it has, so one failing migration stops the rollout
there with the other regions untouched. Within a child, a Deployment moves to
the new image only once its schema Job for the new version has succeeded, so no
service starts on a schema older than its code. A child created by this
reconcile (a fresh cloud, a new region) takes the target at once.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
ORDER = ("IdentityService", "CentralNetwork", "Region", "APIGateway")


@dataclass(frozen=True)
class Step:
    """The child an upgrade waits for."""

    kind: str
    name: str
    position: int  # 1-based, among the children that roll
    total: int


def _version(child: Obj | None) -> str | None:
    return ((child or {}).get("spec") or {}).get("version")


def _deployed(child: Obj | None) -> str | None:
    return ((child or {}).get("status") or {}).get("deployedVersion")


def rollout(children: list[Obj], stored: Mapping[tuple[str, str], Obj | None],
            target: str) -> tuple[list[Obj], Step | None]:
    """``children`` (as the umbrella wants them, every one at ``target``) with the
    version of those the upgrade has not reached held at their stored one, and the
    child being upgraded (None: every child runs ``target``)."""
    out = copy.deepcopy(children)
    rolling = sorted((c for c in out if c["kind"] in ORDER), key=lambda c: ORDER.index(c["kind"]))  # stable
    waiting: Step | None = None
    blocked = False
    for position, child in enumerate(rolling, start=1):
        current = stored.get((child["kind"], child["metadata"]["name"]))
        if blocked and current is not None:
            child["spec"]["version"] = _version(current) or target  # not reached yet: as it is
        if _deployed(current) != target:
            waiting = waiting or Step(child["kind"], child["metadata"]["name"], position, len(rolling))
            # One that exists and is not done holds back those after it; a new one (a fresh
            # cloud, a region added) does not: there is nothing to keep running meanwhile.
            blocked = blocked or current is not None
    return out, waiting
