"""Central plugin: CentralRegion's core plugin, ML2 with Isthmus placement.

Everything Neutron does for networks, subnets, ports, IPAM and security groups
stays ML2's. The subclass exists only because availability-zone validation is a
core-plugin method (ML2 asks DHCP agents; central has none): hints must name
regions or AZs of the Isthmus registry; and because a precise 400 for a segment
or external-flag change must come before ML2 (a mechanism driver's error would
be a 500).
Reservations, binding records and job queueing live in the ``isthmus_central``
ML2 mechanism driver and neutron-lib callbacks, the stable extension points.
"""

from __future__ import annotations

import logging

from neutron.plugins.ml2 import plugin as ml2_plugin
from neutron_lib import exceptions as n_exc
from neutron_lib.api import validators
from neutron_lib.api.validators import availability_zone as az_validator
from neutron_lib.db import api as db_api  # noqa: F401 - neutron loads it first; import order only
from neutron_lib.exceptions import availability_zone as az_exc

from isthmus import registry as reg
from isthmus.network import config
from isthmus.network.central.state import state

LOG = logging.getLogger(__name__)
# What each region's copy is built from once, so central refuses to change it:
# a change at central would leave the copies as they were.
_COPIED_ONCE = ("provider:network_type", "provider:physical_network", "provider:segmentation_id", "segments",
                "router:external")


def hint_list(value) -> list[str]:
    """Hints as stored (a JSON string in the DB model) or as a list."""
    if not value:
        return []
    if isinstance(value, str):
        return az_validator.convert_az_string_to_list(value)
    return list(value)


def validate_hints(availability_zones) -> None:
    """Hints name Isthmus regions or AZs (the registry): a 404 naming the first unknown one."""
    if not availability_zones:
        return
    try:
        state().regions_for_hints(list(availability_zones))
    except reg.UnknownAvailabilityZone as err:
        raise az_exc.AvailabilityZoneNotFound(availability_zone=err.hint) from err


def zones_of_hints(hints: list[str]) -> list[str]:
    """The AZs of the regions an object with these hints may live in."""
    try:
        regions = state().regions_for_hints(hints)
    except reg.UnknownAvailabilityZone:
        return []
    except Exception:  # noqa: BLE001 - a read must not fail over the registry
        LOG.exception("isthmus: cannot resolve availability zones %s", hints)
        return []
    zones = {state().az_of_region(r) for r in regions}
    return sorted(z for z in zones if z)


class CentralPlugin(ml2_plugin.Ml2Plugin):
    # Neutron's API layer reads these per concrete class (name-mangled): without
    # them a subclass of ML2 loses native bulk, pagination and sorting.
    __native_bulk_support = True
    __native_pagination_support = True
    __native_sorting_support = True

    def __init__(self) -> None:
        config.register()
        super().__init__()
        state()  # fail at start, not on the first request, if the Isthmus DB is wrong

    # Override: hints name Isthmus regions/AZs (the registry), not agent AZs.
    def validate_availability_zones(self, context, resource_type, availability_zones):
        validate_hints(availability_zones)

    # Override: a network's zones are those of the regions it may live in.
    def get_network_availability_zones(self, network):
        return zones_of_hints(hint_list(network.get("availability_zone_hints") if isinstance(network, dict)
                                         else getattr(network, "availability_zone_hints", None)))

    # Override: every region's copy is built from the network's segment and
    # external flag; changing them at central would strand the copies (ML2
    # allows a VLAN segment change).
    def update_network(self, context, id, network):
        changes = network.get("network") or {}
        asked = [k for k in _COPIED_ONCE if k in changes and validators.is_attr_set(changes[k])]
        if asked:
            current = super().get_network(context.elevated(), id)
            changed = [k for k in asked if changes[k] != current.get(k)]
            if changed:
                raise n_exc.InvalidInput(error_message=(
                    f"{', '.join(changed)} cannot change: the copies of network {id} in the regions are "
                    "built from it; create a new network instead"))
        return super().update_network(context, id, network)
