"""The two APIs the gateway serves and how their resources are handled."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from isthmus.gateway import listing, microversion


@dataclass(frozen=True)
class Routed:
    """A collection whose members live in one region each (routing table kind)."""

    kind: str  # registry resource_type
    singular: str  # body key of one member
    list_key: str
    label: str  # for "X could not be found"
    placement: str  # "schedule" (AZ/binding) | "with_volume" (the volume's region)
    volume_field: str = ""
    az_field: str | None = None
    # Other fields naming the object's AZ (shown as the top-level AZ too).
    more_az_fields: tuple[str, ...] = ()
    # The fields of the brief list (``GET /<list_key>``). The gateway merges detail
    # lists (their bodies carry the sort fields) and cuts them down to this view.
    summary_fields: tuple[str, ...] = ("id", "name", "links")

    @property
    def az_fields(self) -> tuple[str, ...]:
        return ((self.az_field,) if self.az_field else ()) + self.more_az_fields


@dataclass(frozen=True)
class Api:
    name: str  # "compute" | "volume" (catalog kind, microversion service)
    prefix: str  # mount point on the gateway
    version_segment: str  # "v2.1" | "v3"
    aliases: tuple[str, ...]  # other path prefixes served (e.g. bare "/v2.1")
    mv: microversion.Service
    root_bad_method: int  # status for non-GET on the version root (Nova 404, Cinder 405)
    collections: frozenset[str]
    routed: Mapping[str, Routed]
    sort: Callable[[Mapping[str, Sequence[str]]], tuple[listing.SortKey, ...]]
    sort_params: Callable[[Sequence[listing.SortKey]], list[tuple[str, str]]]
    global_collections: frozenset[str] = field(default_factory=frozenset)
    # Lists take ``offset`` (Cinder): the gateway skips over the merged list, since a
    # region's offset only counts that region's objects.
    list_offset: bool = False
    # Status of ``GET /`` (the version list): Nova 200, Cinder 300 Multiple Choices.
    root_status: int = 200


COMPUTE = Api(
    name="compute", prefix="/compute", version_segment="v2.1", aliases=("/v2.1",), mv=microversion.COMPUTE,
    root_bad_method=404,
    collections=frozenset({
        "servers", "flavors", "images", "os-keypairs", "os-availability-zone", "os-quota-sets",
        "os-quota-class-sets", "limits", "extensions", "os-hypervisors", "os-services", "os-aggregates",
        "os-server-groups", "os-simple-tenant-usage", "os-instance-usage-audit-log", "os-migrations",
        "os-server-external-events", "os-assisted-volume-snapshots", "os-volumes", "os-snapshots",
        "os-networks", "os-floating-ips", "os-security-groups", "os-security-group-rules", "os-fixed-ips",
        "os-tenant-networks", "os-hosts", "os-console-auth-tokens", "os-floating-ip-pools", "os-volumes_boot",
    }),
    routed={"servers": Routed("server", "server", "servers", "Instance", "schedule",
                              az_field="OS-EXT-AZ:availability_zone",
                              more_az_fields=("pinned_availability_zone",))},
    sort=listing.nova_sort,
    sort_params=listing.nova_params,
    global_collections=frozenset({"flavors", "os-keypairs", "os-quota-sets", "os-quota-class-sets"}),
)

# Cinder's brief snapshot view is its detail view less the microversioned extras.
SNAPSHOT_SUMMARY = ("id", "created_at", "updated_at", "name", "description", "volume_id", "status", "size",
                    "metadata")

VOLUME = Api(
    name="volume", prefix="/volume", version_segment="v3", aliases=("/v3",), mv=microversion.VOLUME,
    root_bad_method=405,
    collections=frozenset({
        "volumes", "types", "snapshots", "backups", "limits", "os-quota-sets", "os-quota-class-sets",
        "os-availability-zone", "extensions", "qos-specs", "attachments", "messages", "groups", "group_types",
        "group_snapshots", "os-volume-transfer", "volume-transfers", "workers", "manageable_volumes",
        "manageable_snapshots", "clusters", "os-services", "os-hosts", "scheduler-stats", "capabilities",
        "resource_filters", "default-types", "consistencygroups", "cgsnapshots",
    }),
    routed={
        "volumes": Routed("volume", "volume", "volumes", "Volume", "schedule", az_field="availability_zone"),
        "snapshots": Routed("snapshot", "snapshot", "snapshots", "Snapshot", "with_volume", "volume_id",
                            summary_fields=SNAPSHOT_SUMMARY),
        "backups": Routed("backup", "backup", "backups", "Backup", "with_volume", "volume_id",
                          az_field="availability_zone"),
    },
    sort=listing.cinder_sort,
    sort_params=listing.cinder_params,
    global_collections=frozenset({"types", "qos-specs", "os-quota-sets", "os-quota-class-sets"}),
    list_offset=True,
    root_status=300,
)

APIS = (COMPUTE, VOLUME)
