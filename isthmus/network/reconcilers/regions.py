"""The Neutron (and Nova) APIs the handlers call: central's and each region's,
over the worker's one Keystone session. Clients are made on first use and kept
per region (:class:`isthmus.clients.RegionClients`)."""

from __future__ import annotations

from isthmus.clients import NeutronClient, NovaClient, RegionClients


class Regions:
    def __init__(self, clients: RegionClients, central_region: str) -> None:
        self.clients = clients
        self.central_region = central_region

    @property
    def central(self) -> NeutronClient:
        """Central Neutron: the truth every region converges on."""
        return self.clients.neutron(self.central_region)

    def neutron(self, region: str) -> NeutronClient:
        return self.clients.neutron(region)

    def nova(self, region: str) -> NovaClient:
        return self.clients.nova(region)
