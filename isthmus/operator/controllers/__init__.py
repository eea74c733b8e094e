"""One idempotent reconcile per kind: read the world, converge the owned objects, write status.

Each function takes the resource as stored and a :class:`~isthmus.operator.kube_client.Kube`
client, and returns nothing: it ends by writing the complete status (only when
it differs). The kopf wiring (:mod:`isthmus.operator.handlers`) calls them on
every relevant event and on a timer; none of them assumes it ran before. What the
per-kind modules share lives in ``common``, which they reach through that one name
(``common.reporting``, ``common.Obj``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from isthmus.operator.controllers.ccm import (
    delete_ccm,
    reconcile_ccm,
)
from isthmus.operator.controllers.central import (
    reconcile_central,
    registrable_regions,
)
from isthmus.operator.controllers.cloud import (
    DELETION_PHASES,
    cloud_certificate,
    delete_cloud,
    reconcile_cloud,
    update_condition,
)
from isthmus.operator.controllers.common import (
    CHILD_KINDS,
    MANAGED_KINDS,
    TARGET_NAMESPACES_ENV,
    UMBRELLA_CONDITIONS,
    Obj,
    Stop,
    credentials,
    deployed_version,
    deployment_condition,
    deployment_ready,
    job_condition,
    job_state,
    keystone_for,
    name,
    not_owned,
    ns,
    outside_allowed,
    registrations_condition,
    reporting,
    target_namespaces,
    tls_input,
    write_status,
)
from isthmus.operator.controllers.gateway import (
    reconcile_gateway,
)
from isthmus.operator.controllers.identity import (
    reconcile_identity,
    rotate_fernet_keys,
)
from isthmus.operator.controllers.region import (
    db_sync_of,
    delete_region,
    existing_control_plane,
    last_failure,
    network_attachments,
    parse_ranges,
    range_problems,
    reconcile_region,
    remove_from_registry,
)
from isthmus.operator.controllers.registration import (
    delete_registration,
    identity_region_of,
    reconcile_registration,
)
from isthmus.operator.kube_client import Kube

Reconcile = Callable[[Kube, Obj], Awaitable[float | None]]  # seconds until it must run again, or None
RECONCILERS: dict[str, Reconcile] = {
    "MultiRegionCloud": reconcile_cloud,
    "IdentityService": reconcile_identity,
    "Region": reconcile_region,
    "CentralNetwork": reconcile_central,
    "APIGateway": reconcile_gateway,
    "CloudControllerConfig": reconcile_ccm,
    "EndpointRegistration": reconcile_registration,
}
DELETERS = {
    "MultiRegionCloud": delete_cloud,
    "Region": delete_region,
    "CloudControllerConfig": delete_ccm,
    "EndpointRegistration": delete_registration,
}

__all__ = [
    "CHILD_KINDS",
    "MANAGED_KINDS",
    "Obj",
    "Stop",
    "TARGET_NAMESPACES_ENV",
    "UMBRELLA_CONDITIONS",
    "credentials",
    "deployed_version",
    "deployment_condition",
    "deployment_ready",
    "job_condition",
    "job_state",
    "keystone_for",
    "name",
    "not_owned",
    "ns",
    "outside_allowed",
    "registrations_condition",
    "reporting",
    "target_namespaces",
    "tls_input",
    "write_status",
    "DELETION_PHASES",
    "cloud_certificate",
    "delete_cloud",
    "reconcile_cloud",
    "update_condition",
    "reconcile_identity",
    "rotate_fernet_keys",
    "db_sync_of",
    "delete_region",
    "existing_control_plane",
    "last_failure",
    "network_attachments",
    "parse_ranges",
    "range_problems",
    "reconcile_region",
    "remove_from_registry",
    "reconcile_central",
    "registrable_regions",
    "reconcile_gateway",
    "delete_ccm",
    "reconcile_ccm",
    "delete_registration",
    "identity_region_of",
    "reconcile_registration",
    "Reconcile",
    "RECONCILERS",
    "DELETERS",
]
