"""The local plugin's only way to central Neutron: its public REST API, with
service credentials from ``[isthmus_central]`` (keystoneauth options)."""

from __future__ import annotations

import logging
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from isthmus.clients import NeutronClient, RegionClients, load_session
from isthmus.clients.neutron import Rejected as CentralRejected
from isthmus.clients.neutron import Unavailable as CentralUnavailable
from isthmus.lazy import Lazy
from isthmus.network import config

__all__ = ["CentralClient", "CentralRejected", "CentralUnavailable", "ServiceIdentity", "client"]

LOG = logging.getLogger(__name__)


class CentralClient:
    """Typed reads and writes of central Neutron, over :class:`NeutronClient`.

    ``identity`` is who this client calls central as: Isthmus' service user,
    the one its job worker acts as too (the sandbox and the operator render one
    ``isthmus`` user for both)."""

    def __init__(self, neutron: NeutronClient, identity: ServiceIdentity | None = None) -> None:
        self.neutron = neutron
        self.identity = identity

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


class ServiceIdentity:
    """The service user's id, learnt from its session once (a user's id never
    changes) and its configured name, for when Keystone cannot say the id."""

    def __init__(self, session: ks_session.Session, user_name: str | None,
                 user_domain_name: str | None) -> None:
        self._session = session
        self.user_name = user_name
        self.user_domain_name = user_domain_name
        self._user_id: str | None = None

    def user_id(self) -> str | None:
        if self._user_id is None:
            try:
                self._user_id = self._session.get_user_id()
            except ks_exc.ClientException as err:  # Keystone down or slow: bounded by the session timeout
                LOG.warning("isthmus: own user id not known yet: %s", err)
        return self._user_id

    def is_caller(self, context: Any) -> bool:
        """The request was made by this service user."""
        own = self.user_id()
        if own is not None:
            return bool(context.user_id) and context.user_id == own
        # By name while the id is unknown; a domain named on both sides must agree.
        if not self.user_name or context.user_name != self.user_name:
            return False
        theirs = getattr(context, "user_domain_name", None)
        return not (theirs and self.user_domain_name) or theirs == self.user_domain_name


_client: Lazy[CentralClient] = Lazy()


def client(conf: cfg.ConfigOpts = cfg.CONF) -> CentralClient:
    """One client per neutron-server process, built on first use."""
    return _client.get(lambda: _build(conf))


def _build(conf: cfg.ConfigOpts) -> CentralClient:
    config.register(conf)
    timeout = conf.isthmus.central_timeout
    session = load_session(conf, config.CENTRAL_AUTH_GROUP, default_timeout=timeout)
    clients = RegionClients(session, user_agent="isthmus-local", timeout=timeout)
    group = conf[config.CENTRAL_AUTH_GROUP]
    identity = ServiceIdentity(session, _option(group, "username"), _option(group, "user_domain_name"))
    return CentralClient(clients.neutron(conf.isthmus.central_region), identity)


def _option(group: Any, name: str) -> str | None:
    """An auth plugin's option (registered by loading the plugin; absent for some plugins)."""
    try:
        value = group[name]
    except (cfg.NoSuchOptError, KeyError):
        return None
    return str(value) if value else None
