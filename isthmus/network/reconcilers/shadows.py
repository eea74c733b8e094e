"""Whether shadow ports carry a network's L2 between regions, and into which
regions: VxLAN networks, when ``[isthmus] cross_region_l2 = shadow``, into the
regions that can bind a shadow (not ML2/OVN ones: :mod:`ovn.wiring` serves those).
Both answers are cached for the worker's life (a network's segment type never
changes) or a while (a region's backend). :class:`ShadowReach` puts them together
with the network's routings: where a port's shadows (and so its groups) are."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from isthmus.clients import Unavailable
from isthmus.network import bound_region
from isthmus.network.reconcilers import plans
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.topology import Topology

LOG = logging.getLogger(__name__)
OVN_AGENT_TYPES = ("OVN Controller agent", "OVN Controller Gateway agent")
BACKEND_TTL = 300.0  # seconds a region's reported backend is trusted


class ShadowPolicy:
    def __init__(self, cross_region_l2: str, regions: Regions, ovn_regions: Collection[str] = ()) -> None:
        self.cross_region_l2 = cross_region_l2
        self.regions = regions
        self.ovn_regions = frozenset(ovn_regions)  # configured ``[ovn:<region>]`` sections
        self._network_types: dict[str, str | None] = {}
        self._backends: dict[str, tuple[float, bool]] = {}  # region -> (when checked, runs ML2/OVN)

    def wants_shadows(self, network: Mapping[str, Any]) -> bool:
        """Shadows carry VxLAN between regions; VLAN and flat networks ride the
        physical network, which already spans them."""
        return self.cross_region_l2 == "shadow" and network.get("provider:network_type") == "vxlan"

    def network_wants_shadows(self, network_id: str) -> bool:
        return self.cross_region_l2 == "shadow" and self.network_type(network_id) == "vxlan"

    def network_type(self, network_id: str) -> str | None:
        """A network's segment type (None: central has no such network). Cached:
        central refuses segment changes, so it never changes while it exists."""
        if network_id not in self._network_types:
            network = self.regions.central.get("networks", network_id)
            if network is None:
                return None
            self._network_types[network_id] = network.get("provider:network_type")
        return self._network_types[network_id]

    def binds_shadows(self, region: str) -> bool:
        """Whether shadow ports can carry L2 into the region: not on ML2/OVN (an
        OVN region binds ports to chassis; a shadow's host has none). Configured
        ``[ovn:<region>]`` decides; else the region's agents tell (cached)."""
        if region in self.ovn_regions:
            return False
        checked = self._backends.get(region)
        if checked is None or time.monotonic() - checked[0] > BACKEND_TTL:
            try:
                ovn = any(self.regions.neutron(region).list("agents", agent_type=t, fields="id")
                          for t in OVN_AGENT_TYPES)
            except Unavailable:
                ovn = checked[1] if checked else False
            if ovn:
                LOG.error("%s runs ML2/OVN (its agents say so) but the worker has no [ovn:%s] section: no "
                          "cross-region L2 there until it has one", region, region)
            checked = (time.monotonic(), ovn)
            self._backends[region] = checked
        return not checked[1]


@dataclass
class ShadowReach:
    """Where port_sync keeps a network's shadows: the regions its routings name,
    when its type wants shadows and the region binds them. Routings are read once
    per job (they change as ports bind). :meth:`regions` may ask central for the
    network's type (``Unavailable``); :meth:`carries` asks only the one region it
    is about (its backend, cached), so a hung region delays only its own answer."""

    policy: ShadowPolicy
    topology: Topology
    _regions: dict[str, frozenset[str]] = field(default_factory=dict)

    def regions(self, network_id: str) -> frozenset[str]:
        """The regions the network's routings name, if its type wants shadows."""
        if network_id not in self._regions:
            wants = self.policy.network_wants_shadows(network_id)
            self._regions[network_id] = frozenset(self.topology.routed_regions(network_id) if wants else ())
        return self._regions[network_id]

    def carries(self, port: Mapping[str, Any], region: str) -> bool:
        """Whether ``region`` holds a shadow of ``port`` in the port's groups (so
        it counts the port as their member itself)."""
        return (plans.is_compute(port) and bound_region(port) not in (None, region)
                and bool(plans.shadow_security(port)["security_groups"])
                and region in self.regions(port["network_id"]) and self.policy.binds_shadows(region))
