"""Where things are, as the registry records it: the regions, the region of a
pod, the regions a network reaches. Read afresh on every call: pods and routings
change under a running worker (an operator registers a region, a port binds)."""

from __future__ import annotations

from isthmus.registry import Registry


class Topology:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def regions(self) -> list[str]:
        """Every regional pod's region (central's pod is not one)."""
        return [p.region_name for p in self.registry.regional_pods()]

    def region_of_pod(self, pod_id: str) -> str | None:
        pod = next((p for p in self.registry.pods() if p.pod_id == pod_id), None)
        return pod.region_name if pod else None

    def routed_regions(self, network_id: str) -> set[str]:
        """Regions where a port of the network was bound (they need shadows)."""
        return {r for r in (self.region_of_pod(x.pod_id) for x in self.registry.routings_of(network_id, "network"))
                if r}
