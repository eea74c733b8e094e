"""Central L3 plugin: Neutron's stock router service plugin, with Isthmus zones.

Central runs no L3 agent, and Neutron checks a router's AZ hints against L3
agents: any hint would be refused. The subclass overrides only the neutron-lib
AZ interface (``validate_availability_zones``, ``get_router_availability_zones``,
as the core plugin does for networks) and, before Neutron's own
``add_router_interface``, refuses a network hinted outside the router's regions
(a router hinted to RegionOne keeps to RegionOne; docs/networking.md, Routers).
"""

from __future__ import annotations

from neutron.services.l3_router import l3_router_plugin
from neutron_lib import exceptions as n_exc
from neutron_lib.plugins import directory

from isthmus import registry as reg
from isthmus.network.central.plugin import hint_list, validate_hints, zones_of_hints
from isthmus.network.central.state import state


def _router_hints(router) -> list[str]:
    """Hints of a router DB object (kept in its extra attributes) or dict."""
    if isinstance(router, dict):
        return hint_list(router.get("availability_zone_hints"))
    extra = getattr(router, "extra_attributes", None)
    return hint_list(getattr(extra, "availability_zone_hints", None))


class CentralL3Plugin(l3_router_plugin.L3RouterPlugin):
    # Neutron's API layer reads these per concrete class (name-mangled).
    __native_pagination_support = True
    __native_sorting_support = True

    # Override: hints name Isthmus regions/AZs (the registry), not L3 agent AZs.
    def validate_availability_zones(self, context, resource_type, availability_zones):
        validate_hints(availability_zones)

    # Override: a router's zones are those of the regions its halves may be in.
    def get_router_availability_zones(self, router):
        return zones_of_hints(_router_hints(router))

    def create_router(self, context, router):
        body = router.get("router") or {}
        self._check_network_regions(context, hint_list(body.get("availability_zone_hints")),
                                    (body.get("external_gateway_info") or {}).get("network_id"),
                                    "external_gateway_info")
        return super().create_router(context, router)

    def update_router(self, context, id, router):
        gateway = (router.get("router") or {}).get("external_gateway_info") or {}
        if gateway.get("network_id"):
            self._check_network_regions(context, _router_hints(self.get_router(context, id)),
                                        gateway["network_id"], "external_gateway_info")
        return super().update_router(context, id, router)

    def add_router_interface(self, context, router_id, interface_info=None):
        info = interface_info or {}
        core, admin = directory.get_plugin(), context.elevated()
        network_id = None
        if info.get("port_id"):
            network_id = core.get_port(admin, info["port_id"])["network_id"]
        elif info.get("subnet_id"):
            network_id = core.get_subnet(admin, info["subnet_id"])["network_id"]
        self._check_network_regions(context, _router_hints(self.get_router(context, router_id)), network_id,
                                    "port_id" if info.get("port_id") else "subnet_id")
        return super().add_router_interface(context, router_id, interface_info)

    @staticmethod
    def _check_network_regions(context, router_hints: list[str], network_id: str | None, field: str) -> None:
        """A router with hints keeps to their regions: a network it joins (an
        interface or its gateway) must be hinted within them."""
        if not router_hints or not network_id:
            return  # a router of every region, or Neutron's own checks answer
        network = directory.get_plugin().get_network(context.elevated(), network_id)
        network_hints = hint_list(network.get("availability_zone_hints"))
        try:
            allowed = set(state().regions_for_hints(router_hints))
            wanted = set(state().regions_for_hints(network_hints))
        except reg.UnknownAvailabilityZone:
            return  # validate_availability_zones names it
        if not wanted <= allowed:
            raise n_exc.BadRequest(resource="router", msg=(
                f"{field}: network {network_id} may live in {', '.join(sorted(wanted - allowed))}, outside the "
                f"router's availability_zone_hints {router_hints} (regions {', '.join(sorted(allowed))}); hint "
                "the network within the router's regions, or use a router without hints"))
