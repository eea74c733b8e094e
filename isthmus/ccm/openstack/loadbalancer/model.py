"""Services and Nodes as plain records, and the Service annotations read here.

Annotations: OCCM's names where OCCM has one, so existing manifests keep their
meaning; ``loadbalancer.openstack.org/region`` is Isthmus' own. Region-scoped
IDs (subnet, network, member subnet, floating network) may carry a region
suffix, ``loadbalancer.openstack.org/subnet-id.RegionTwo``, which wins over the
plain annotation in that region (a subnet ID names a subnet of one region's
Neutron; with Isthmus networking a central subnet has the same ID everywhere
and the plain form is enough).

Any other ``loadbalancer.openstack.org/*`` annotation is reported (logged once
per Service and put in an event) and has no effect.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from isthmus.ccm.openstack import providerid

if TYPE_CHECKING:
    from isthmus.ccm.kube.nodes import NodeView

PREFIX = "loadbalancer.openstack.org/"
ANN_REGION = PREFIX + "region"  # Isthmus: only this region gets a load balancer
ANN_INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
ANN_SUBNET_ID = PREFIX + "subnet-id"
ANN_NETWORK_ID = PREFIX + "network-id"
ANN_MEMBER_SUBNET_ID = PREFIX + "member-subnet-id"
ANN_FLOATING_NETWORK_ID = PREFIX + "floating-network-id"
ANN_KEEP_FLOATINGIP = PREFIX + "keep-floatingip"
ANN_LB_METHOD = PREFIX + "lb-method"
ANN_PROXY_PROTOCOL = PREFIX + "proxy-protocol"
ANN_FLAVOR_ID = PREFIX + "flavor-id"
ANN_AVAILABILITY_ZONE = PREFIX + "availability-zone"
ANN_HOSTNAME = PREFIX + "hostname"
ANN_LB_ADDRESS = PREFIX + "load-balancer-address"
ANN_CONNECTION_LIMIT = PREFIX + "connection-limit"
ANN_ENABLE_MONITOR = PREFIX + "enable-health-monitor"
ANN_MONITOR_DELAY = PREFIX + "health-monitor-delay"
ANN_MONITOR_TIMEOUT = PREFIX + "health-monitor-timeout"
ANN_MONITOR_MAX_RETRIES = PREFIX + "health-monitor-max-retries"
ANN_MONITOR_MAX_RETRIES_DOWN = PREFIX + "health-monitor-max-retries-down"
# Kubernetes' own (read when spec.loadBalancerSourceRanges is empty), as OCCM does.
ANN_SOURCE_RANGES = "service.beta.kubernetes.io/load-balancer-source-ranges"

REGIONAL_ANNOTATIONS = (ANN_SUBNET_ID, ANN_NETWORK_ID, ANN_MEMBER_SUBNET_ID, ANN_FLOATING_NETWORK_ID)
SUPPORTED_ANNOTATIONS = frozenset({
    ANN_REGION, ANN_SUBNET_ID, ANN_NETWORK_ID, ANN_MEMBER_SUBNET_ID, ANN_FLOATING_NETWORK_ID,
    ANN_KEEP_FLOATINGIP, ANN_LB_METHOD, ANN_PROXY_PROTOCOL, ANN_FLAVOR_ID, ANN_AVAILABILITY_ZONE,
    ANN_HOSTNAME, ANN_LB_ADDRESS, ANN_CONNECTION_LIMIT, ANN_ENABLE_MONITOR, ANN_MONITOR_DELAY,
    ANN_MONITOR_TIMEOUT, ANN_MONITOR_MAX_RETRIES, ANN_MONITOR_MAX_RETRIES_DOWN,
})

FINALIZER = "service.kubernetes.io/load-balancer-cleanup"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"


@dataclass(frozen=True)
class ServicePort:
    name: str
    protocol: str  # TCP, UDP, SCTP
    port: int
    node_port: int


@dataclass(frozen=True)
class ServiceView:
    """The parts of a ``V1Service`` the service controller reads."""

    namespace: str
    name: str
    uid: str
    type: str
    ports: tuple[ServicePort, ...]
    annotations: Mapping[str, str] = field(default_factory=dict)
    load_balancer_class: str = ""
    load_balancer_ip: str = ""
    source_ranges: tuple[str, ...] = ()  # spec.loadBalancerSourceRanges
    # spec.healthCheckNodePort of an externalTrafficPolicy: Local Service (0: Cluster)
    local_health_port: int = 0
    finalizers: tuple[str, ...] = ()
    deleting: bool = False
    ingress: tuple[Mapping[str, str], ...] = ()
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def same_content(self, other: ServiceView | None) -> bool:
        """Equal but for the resourceVersion (the Service cache's change test)."""
        return other is not None and self == replace(other, resource_version=self.resource_version)

    @property
    def wants_load_balancer(self) -> bool:
        """Type LoadBalancer, not being deleted, and not left to another controller.

        A Service naming ``spec.loadBalancerClass`` belongs to that class's
        controller (as in k8s' service controller, which skips them)."""
        return self.type == "LoadBalancer" and not self.deleting and not self.load_balancer_class

    @property
    def has_finalizer(self) -> bool:
        return FINALIZER in self.finalizers


def service_view(svc: Any) -> ServiceView:
    meta, spec, status = svc.metadata, svc.spec, svc.status
    ports = tuple(
        ServicePort(p.name or "", (p.protocol or "TCP").upper(), int(p.port), int(p.node_port or 0))
        for p in (spec.ports if spec else None) or ()
    )
    lb_status = status.load_balancer if status is not None else None
    ingress = tuple(
        {k: v for k, v in (("ip", i.ip), ("hostname", i.hostname)) if v}
        for i in (lb_status.ingress if lb_status is not None else None) or ()
    )
    return ServiceView(
        namespace=meta.namespace or "default",
        name=meta.name,
        uid=meta.uid or "",
        type=(spec.type if spec else None) or "ClusterIP",
        ports=ports,
        annotations=dict(meta.annotations or {}),
        load_balancer_class=(spec.load_balancer_class if spec else None) or "",
        load_balancer_ip=(spec.load_balancer_ip if spec else None) or "",
        source_ranges=tuple((spec.load_balancer_source_ranges if spec else None) or ()),
        local_health_port=int(spec.health_check_node_port or 0)
        if spec and spec.external_traffic_policy == "Local" else 0,
        finalizers=tuple(meta.finalizers or ()),
        deleting=meta.deletion_timestamp is not None,
        ingress=ingress,
        resource_version=meta.resource_version or "",
    )


@dataclass(frozen=True)
class LBNode:
    """A Node as a load-balancer member candidate."""

    name: str
    region: str  # "" when neither the providerID nor the label names one
    address: str  # the first InternalIP, "" if none
    ready: bool
    unschedulable: bool
    excluded: bool  # node.kubernetes.io/exclude-from-external-load-balancers
    server_id: str = ""  # the providerID's instance id ("" when it has none)


def node_region(provider_id: str, labels: Mapping[str, str]) -> str:
    """The region in the providerID (authoritative), else the region label."""
    if provider_id:
        try:
            region = providerid.parse(provider_id).region
        except providerid.ProviderIDError:  # a foreign providerID: no region from it
            region = ""
        if region:
            return region
    return labels.get(LABEL_REGION, "")


def _lb_node(name: str, provider_id: str, labels: Mapping[str, str], addresses: Iterable[tuple[str, str]],
             ready: bool, unschedulable: bool) -> LBNode:
    internal = [address for kind, address in addresses if kind == "InternalIP"]
    return LBNode(
        name=name,
        region=node_region(provider_id, labels),
        address=internal[0] if internal else "",
        ready=ready,
        unschedulable=unschedulable,
        excluded=LABEL_EXCLUDE in labels,
        server_id=_server_id(provider_id),
    )


def _server_id(provider_id: str) -> str:
    try:
        return providerid.parse(provider_id).instance_id if provider_id else ""
    except providerid.ProviderIDError:
        return ""


def lb_node(node: Any) -> LBNode:
    """From a ``V1Node``."""
    meta, spec, status = node.metadata, node.spec, node.status
    addresses = (status.addresses if status else None) or ()
    conditions = (status.conditions if status else None) or ()
    return _lb_node(meta.name, (spec.provider_id if spec else None) or "", dict(meta.labels or {}),
                    [(a.type, a.address) for a in addresses],
                    any(c.type == "Ready" and c.status == "True" for c in conditions),
                    bool(spec.unschedulable) if spec else False)


def lb_node_from_view(view: NodeView) -> LBNode:
    """From the node controllers' cache (``NodeView``): the same record as :func:`lb_node`."""
    return _lb_node(view.name, view.provider_id, view.labels, [(a.type, a.address) for a in view.addresses],
                    view.ready, view.unschedulable)


def annotation(annotations: Mapping[str, str], key: str, region: str = "") -> str:
    """An annotation's value; ``key.REGION`` wins for region-scoped keys."""
    if region and key in REGIONAL_ANNOTATIONS:
        regional = annotations.get(f"{key}.{region}")
        if regional is not None:
            return regional.strip()
    return annotations.get(key, "").strip()


def unknown_annotations(annotations: Mapping[str, str]) -> list[str]:
    """``loadbalancer.openstack.org/*`` keys this CCM does not implement."""
    unknown = []
    for key in sorted(annotations):
        if not key.startswith(PREFIX):
            continue
        if key in SUPPORTED_ANNOTATIONS:
            continue
        # "loadbalancer.openstack.org/subnet-id.RegionTwo": the suffix is on the name part
        base_name, dot, suffix = key[len(PREFIX):].partition(".")
        if dot and suffix and PREFIX + base_name in REGIONAL_ANNOTATIONS:
            continue
        unknown.append(key)
    return unknown
