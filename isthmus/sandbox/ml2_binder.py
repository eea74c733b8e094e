"""SANDBOX ONLY: an ML2 mechanism driver that binds ports without agents.

The sandbox's compute hosts run Nova's fake virt driver and no Open vSwitch agent,
so stock ML2 leaves their ports ``binding_failed`` and boots fail. This driver binds
every normal-vNIC port that names a host, as an OVS agent would, and reports it
ACTIVE. It uses only neutron-lib's public MechanismDriver API. Never load it in a
real cloud: it claims ports were wired when nothing was wired.
"""

from __future__ import annotations

from neutron_lib.api.definitions import portbindings
from neutron_lib import constants
from neutron_lib.plugins.ml2 import api


class SandboxBinderDriver(api.MechanismDriver):
    def initialize(self) -> None:
        pass

    def bind_port(self, context: api.PortContext) -> None:
        if context.current.get(portbindings.VNIC_TYPE, portbindings.VNIC_NORMAL) != portbindings.VNIC_NORMAL:
            return
        if not context.host:
            return
        for segment in context.segments_to_bind:
            context.set_binding(
                segment[api.ID],
                portbindings.VIF_TYPE_OVS,
                {portbindings.CAP_PORT_FILTER: True, portbindings.OVS_HYBRID_PLUG: False},
                status=constants.PORT_STATUS_ACTIVE,
            )
            return
