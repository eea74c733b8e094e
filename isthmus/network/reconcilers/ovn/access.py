"""The worker's way into the ML2/OVN regions: their databases (one
``[ovn:<region>]`` section each), central's tunnel keys every region agrees on,
and what binding_sync's chassis collection remembers between passes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from isthmus.network.reconcilers.ovn.region import OvnRegion
from isthmus.network.reconcilers.ovn.wiring import Hypervisors
from isthmus.registry import TunnelKeys


class OvnAccess:
    def __init__(self, regions: Mapping[str, OvnRegion] | None = None, keys: TunnelKeys | None = None) -> None:
        self.regions: Mapping[str, OvnRegion] = dict(regions or {})
        self.keys = keys  # None: no keys to agree on, so nothing is wired
        # region -> remote chassis -> when first seen unreferenced (collect_chassis' grace)
        self._unreferenced: dict[str, dict[str, datetime]] = {}

    def region(self, name: str) -> OvnRegion | None:
        """The region's OVN databases when it runs ML2/OVN and the worker may reach them."""
        return self.regions.get(name)

    def hypervisors(self) -> Hypervisors:
        """A fresh lookup of remote ports' home chassis (it caches for one job)."""
        return Hypervisors(self.regions)

    def unreferenced_chassis(self, region: str) -> dict[str, datetime]:
        """The region's remote chassis nothing named at the last collections, and since when."""
        return self._unreferenced.setdefault(region, {})
