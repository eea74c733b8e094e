"""One Keystone session, per-region clients: lazy, cached, isolated.

A region missing from the catalogue or down fails only the calls that need it.
"""

from isthmus.clients.neutron import NeutronClient, Rejected, Unavailable
from isthmus.clients.nova import NovaClient
from isthmus.clients.regions import RegionClients, load_session

__all__ = ["NeutronClient", "NovaClient", "RegionClients", "Rejected", "Unavailable", "load_session"]
