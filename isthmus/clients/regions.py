"""Per-region clients over one Keystone session."""

from __future__ import annotations

import threading

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from isthmus.clients.neutron import NeutronClient


def register_auth_opts(conf: cfg.ConfigOpts, group: str) -> None:
    """Standard keystoneauth options (auth_type, auth_url, username, ...) in ``group``."""
    try:
        ks_loading.register_session_conf_options(conf, group)
        ks_loading.register_auth_conf_options(conf, group)
    except cfg.DuplicateOptError:
        pass


def load_session(conf: cfg.ConfigOpts, group: str) -> ks_session.Session:
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    return ks_loading.load_session_from_conf_options(conf, group, auth=auth)


class RegionClients:
    """Lazily built, cached per region; building one never touches another."""

    def __init__(self, session: ks_session.Session, user_agent: str = "isthmus") -> None:
        # Timeouts are the session's (the ``timeout`` option of its config group).
        self.session = session
        self.user_agent = user_agent
        self._neutron: dict[str, NeutronClient] = {}
        self._lock = threading.Lock()

    def neutron(self, region: str) -> NeutronClient:
        with self._lock:
            if region not in self._neutron:
                http = ks_adapter.Adapter(
                    self.session, service_type="network", interface=["internal", "public"],
                    region_name=region, user_agent=self.user_agent,
                    connect_retries=1, status_code_retries=1,
                )
                self._neutron[region] = NeutronClient(http, region)
            return self._neutron[region]
