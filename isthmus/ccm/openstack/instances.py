"""InstancesV2 across regions: exists, shutdown and metadata of a Node.

Region choice (docs/ccm.md, "providerID" and "Search order"):

* a providerID with a region is authoritative: look only there; a region
  this CCM does not serve is an error, never "not found";
* otherwise search every configured region; the node's
  ``topology.kubernetes.io/region`` label only moves that region to the front
  (labels can be edited, so it never narrows the search);
* by ID when the providerID has one, else by exact node name;
* a 404 (or no match by name) moves on; any other answer stops the search
  with an error naming the region; two servers with the name in one region
  is an error;
* :class:`InstanceNotFound` only when every searched region answered.

The OpenStack side is the small :class:`RegionClient` protocol, so the
search logic runs the same against Nova or against an in-memory fake.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from isthmus.ccm.config import NetworkingOptions
from isthmus.ccm.errors import CCMError, InstanceNotFound, MultipleResultsError, RegionError, UnknownRegionError
from isthmus.ccm.openstack import providerid
from isthmus.ccm.openstack.addresses import node_addresses
from isthmus.ccm.openstack.model import Flavor, Network, NodeAddress, Port, Server, Subport

LOG = logging.getLogger(__name__)

REGION_LABEL = "topology.kubernetes.io/region"
SHUTOFF = "SHUTOFF"


class RegionClient(Protocol):
    """Nova and Neutron of one region.

    Lookups by ID return ``None`` for a 404; every other failure raises
    :class:`RegionError` naming the region.
    """

    region: str

    def get_server(self, server_id: str) -> Server | None: ...

    def find_servers(self, name: str) -> list[Server]:
        """Servers whose name is exactly ``name`` (all pages)."""
        ...

    def get_flavor(self, flavor_id: str) -> Flavor | None: ...

    def find_flavor(self, name: str) -> Flavor | None:
        """The flavor named exactly ``name`` the project can see (all pages)."""
        ...

    def list_ports(self, device_id: str) -> list[Port]: ...

    def get_port(self, port_id: str) -> Port | None: ...

    def get_network(self, network_id: str) -> Network | None: ...


class RegionClients(Protocol):
    """Gives the client of a region; raises :class:`RegionError` if it cannot."""

    def client(self, region: str) -> RegionClient: ...


@dataclass(frozen=True)
class NodeRef:
    """What a lookup needs from a Kubernetes Node."""

    name: str
    provider_id: str = ""
    region_label: str = ""

    @classmethod
    def from_labels(cls, name: str, provider_id: str | None, labels: Mapping[str, str] | None) -> NodeRef:
        return cls(name, provider_id or "", (labels or {}).get(REGION_LABEL, ""))


@dataclass(frozen=True)
class SearchPlan:
    instance_id: str  # empty: search by node name
    regions: tuple[str, ...]
    node_name: str

    @property
    def by_id(self) -> bool:
        return bool(self.instance_id)


@dataclass(frozen=True)
class Found:
    server: Server
    region: str


@dataclass(frozen=True)
class InstanceMetadata:
    provider_id: str
    instance_type: str
    zone: str
    region: str
    addresses: tuple[NodeAddress, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The shape ``isthmus ccm lookup`` prints."""
        return {
            "providerID": self.provider_id,
            "instanceType": self.instance_type,
            "zone": self.zone,
            "region": self.region,
            "addresses": [a.to_dict() for a in self.addresses],
        }


def plan_search(node: NodeRef, regions: Sequence[str]) -> SearchPlan:
    """Which regions to ask, in which order, by ID or by name. No I/O."""
    instance_id = region = ""
    if node.provider_id:
        parsed = providerid.parse(node.provider_id)
        instance_id, region = parsed.instance_id, parsed.region
    if region:
        if region not in regions:
            raise UnknownRegionError(
                f'getInstance: ProviderID "{node.provider_id}" didn\'t match supported regions "{",".join(regions)}"'
            )
        return SearchPlan(instance_id, (region,), node.name)
    preferred = node.region_label if node.region_label in regions else ""
    ordered = ((preferred,) if preferred else ()) + tuple(r for r in regions if r != preferred)
    return SearchPlan(instance_id, ordered, node.name)


def find_instance(plan: SearchPlan, clients: RegionClients) -> Found:
    """Run ``plan``: first hit wins, first non-404 failure stops."""
    for region in plan.regions:
        client = clients.client(region)
        if plan.by_id:
            server = client.get_server(plan.instance_id)
            if server is not None:
                return Found(server, region)
            continue
        matches = client.find_servers(plan.node_name)
        if len(matches) > 1:
            raise MultipleResultsError(
                f"region {region}: multiple results where only one expected for name {plan.node_name!r}"
            )
        if matches:
            return Found(matches[0], region)
    what = f"ID {plan.instance_id}" if plan.by_id else f"name {plan.node_name!r}"
    raise InstanceNotFound(f"instance not found: no server with {what} in regions {','.join(plan.regions)}")


_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_LABEL_JUNK = re.compile(r"[^-a-zA-Z0-9_.]+")


def is_valid_label_value(value: str) -> bool:
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


def sanitize_label(value: str) -> str:
    """OCCM's SanitizeLabel: runs of bad chars -> ``-``, trim, cut to 63.

    Not re-trimmed after the cut, as upstream.
    """
    return _LABEL_JUNK.sub("-", value).strip("-_.")[:63]


def instance_type(server: Server, client: RegionClient) -> str:
    """Flavor ``original_name`` if a valid label value, else via a flavor read.

    The flavor read gives its name if that is a valid label value, else its
    ID. A failed read moves on to the next key, as OCCM does.

    OCCM reads servers at compute 2.1, where the flavor carries its ``id``;
    openstacksdk negotiates the newest microversion, where Nova embeds the
    flavor (``original_name``, no ``id``, from 2.47). A name that is no label
    value is then looked up by name, so the node gets the flavor ID, as OCCM
    gives (GET-ting the name as an ID, OCCM's quirk, always found nothing).
    """
    for key in ("original_name", "id"):
        value = server.flavor.get(key, "")
        if not value:
            continue
        if key == "original_name" and is_valid_label_value(value):
            return value
        try:
            flavor = client.find_flavor(value) if key == "original_name" else client.get_flavor(value)
        except RegionError as exc:
            LOG.warning("flavor %s of server %s: %s", value, server.id, exc)
            continue
        if flavor is not None:
            return flavor.name if is_valid_label_value(flavor.name) else flavor.id
    raise CCMError(f"region {client.region}: flavor original_name/id not found for server {server.id}")


def resolve_subports(ports: Sequence[Port], client: RegionClient) -> list[Subport]:
    """Trunk subports with their network names; failures skip that subport."""
    out: list[Subport] = []
    for port in ports:
        for sub_id in port.subport_ids:
            try:
                sub = client.get_port(sub_id)
                network = client.get_network(sub.network_id) if sub is not None else None
            except RegionError as exc:
                LOG.warning("trunk subport %s of port %s: %s", sub_id, port.id, exc)
                continue
            if sub is None or network is None:
                LOG.warning("trunk subport %s of port %s: port or network not found", sub_id, port.id)
                continue
            out.append(Subport(network.name, sub.fixed_ips))
    return out


@dataclass
class Instances:
    """The InstancesV2 calls the node controllers make."""

    clients: RegionClients
    regions: tuple[str, ...]
    networking: NetworkingOptions = field(default_factory=NetworkingOptions)
    environ: Mapping[str, str] | None = None  # None: os.environ, read per call

    def lookup(self, node: NodeRef) -> Found:
        return find_instance(plan_search(node, self.regions), self.clients)

    def instance_exists(self, node: NodeRef) -> bool:
        """False only on a clean not-found; other failures raise."""
        try:
            self.lookup(node)
        except InstanceNotFound:
            return False
        return True

    def instance_shutdown(self, node: NodeRef) -> bool:
        """True iff Nova says SHUTOFF; not-found raises too."""
        return self.lookup(node).server.status == SHUTOFF

    def instance_shutdown_if_exists(self, node: NodeRef) -> bool | None:
        """``instance_exists`` and ``instance_shutdown`` in one lookup.

        None on a clean not-found, else whether Nova says SHUTOFF; other
        failures raise. Upstream's lifecycle controller makes the two calls
        separately: two server GETs per NotReady node every monitor period.
        """
        try:
            found = self.lookup(node)
        except InstanceNotFound:
            return None
        return found.server.status == SHUTOFF

    def instance_metadata(self, node: NodeRef) -> InstanceMetadata:
        found = self.lookup(node)
        client = self.clients.client(found.region)
        server = found.server
        kind = instance_type(server, client)
        ports = client.list_ports(server.id)
        addresses = node_addresses(server, ports, resolve_subports(ports, client), self.networking)
        return InstanceMetadata(
            provider_id=providerid.format(server.id, found.region, providerid.regional_enabled(self.environ)),
            instance_type=kind,
            zone=sanitize_label(server.availability_zone),
            region=found.region,
            addresses=tuple(addresses),
        )
