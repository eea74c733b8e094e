"""The local plugin's only way to central Neutron: its public REST API, with
service credentials from ``[isthmus_central]`` (keystoneauth options)."""

from __future__ import annotations

import threading
from typing import Any

from oslo_config import cfg

from isthmus.clients import NeutronClient, RegionClients, load_session
from isthmus.clients.neutron import Rejected as CentralRejected
from isthmus.clients.neutron import Unavailable as CentralUnavailable
from isthmus.network import config

__all__ = ["CentralClient", "CentralRejected", "CentralUnavailable", "client"]


class CentralClient:
    """Typed reads and writes of central Neutron, over :class:`NeutronClient`."""

    def __init__(self, neutron: NeutronClient) -> None:
        self.neutron = neutron

    def network(self, network_id: str) -> dict | None:
        return self.neutron.get("networks", network_id)

    def subnet(self, subnet_id: str) -> dict | None:
        return self.neutron.get("subnets", subnet_id)

    def subnets(self, network_id: str) -> list[dict]:
        return self.neutron.list("subnets", network_id=network_id)

    def port(self, port_id: str) -> dict | None:
        return self.neutron.get("ports", port_id)

    def ports(self, **filters: Any) -> list[dict]:
        return self.neutron.list("ports", **filters)

    def security_group(self, sg_id: str) -> dict | None:
        return self.neutron.get("security-groups", sg_id)

    def security_groups(self, **filters: Any) -> list[dict]:
        return self.neutron.list("security-groups", **filters)

    def create_port(self, port: dict) -> dict:
        return self.neutron.create("ports", port)

    def update_port(self, port_id: str, changes: dict, if_revision: int | None = None) -> dict | None:
        return self.neutron.update("ports", port_id, changes, if_revision)

    def delete_port(self, port_id: str) -> None:
        self.neutron.delete("ports", port_id)


_client: CentralClient | None = None
_lock = threading.Lock()


def client(conf: cfg.ConfigOpts = cfg.CONF) -> CentralClient:
    """One client per neutron-server process, built on first use."""
    global _client
    with _lock:
        if _client is None:
            config.register(conf)
            timeout = conf.isthmus.central_timeout
            session = load_session(conf, config.CENTRAL_AUTH_GROUP, default_timeout=timeout)
            clients = RegionClients(session, user_agent="isthmus-local", timeout=timeout)
            _client = CentralClient(clients.neutron(conf.isthmus.central_region))
        return _client
