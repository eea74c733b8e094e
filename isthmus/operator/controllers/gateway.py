"""APIGateway: the Nova/Cinder gateway in front of the ready Regions."""


from __future__ import annotations

import logging
from typing import Any

from isthmus.operator import apply, model, objects
from isthmus.operator import conditions as cond
from isthmus.operator.conditions import Condition
from isthmus.operator.controllers import common
from isthmus.operator.kube_client import Kube

LOG = logging.getLogger(__name__)


# --- APIGateway ------------------------------------------------------------------------------------------------------

async def reconcile_gateway(kube: Kube, gw: common.Obj) -> None:
    spec = model.defaulted_spec("APIGateway", gw.get("spec"))
    conds: list[Condition] = []
    extra: dict[str, Any] = {"endpoint": objects.gateway_endpoints(gw).public}
    async with common.reporting(kube, gw, conds, extra, spec):
        creds = await common.credentials(kube, gw, spec, conds)
        await common.tls_input(kube, gw, spec, conds)
        keystone = await common.keystone_for(kube, gw, spec, conds)
        regions: list[Any] = []  # the ready Region objects
        waiting: list[Any] = []  # the others, or the names of missing ones
        selected: list[str] = []  # the region names behind the gateway, ready or not
        for ref in spec.get("regionRefs") or []:
            region = await kube.get("Region", common.ns(gw), ref)
            (regions if region is not None and cond.child_ready(region) else waiting).append(region or ref)
            if region is not None:
                selected.append(region["spec"]["name"])
        backends = objects.gateway_backends(gw, regions)
        if waiting:
            names = [w if isinstance(w, str) else common.name(w) for w in waiting]
            conds.append(cond.false("BackendsReady", "Waiting", "waiting for Region " + ", ".join(sorted(names))))
        else:
            conds.append(cond.true("BackendsReady", message=f"{len(backends)} regions behind the gateway"))
        if any(isinstance(w, str) for w in waiting):
            # A Region it names and that no read found: not a reason to stop serving that
            # region ([gateway] regions would lose it and the pods roll). Wait as it is.
            raise common.Stop
        desired = objects.gateway_objects(gw, creds, keystone, backends, selected)
        stored = await apply.ensure_all(kube, desired)
        await apply.prune(kube, gw, common.MANAGED_KINDS, desired)
        dep = stored[("Deployment", common.name(gw))]
        conds.append(common.deployment_condition("DeploymentReady", dep, spec["replicas"], "isthmus-gateway"))
        conds.append(await common.registrations_condition(kube, gw, stored))
        extra["backends"] = [{"region": b.region, "novaURL": b.nova_url, "cinderURL": b.cinder_url, "az": b.az}
                             for b in backends]
        extra["configHash"] = dep["spec"]["template"]["metadata"]["annotations"][objects.CONFIG_HASH]


