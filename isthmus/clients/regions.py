"""Per-region clients over one Keystone session."""

from __future__ import annotations

import threading

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from isthmus.clients.neutron import DEFAULT_TIMEOUT, NeutronClient
from isthmus.clients.nova import NovaClient


def register_auth_opts(conf: cfg.ConfigOpts, group: str) -> None:
    """Standard keystoneauth options (auth_type, auth_url, username, ...) in ``group``."""
    try:
        ks_loading.register_session_conf_options(conf, group)
        ks_loading.register_auth_conf_options(conf, group)
    except cfg.DuplicateOptError:
        pass


def auth_opts() -> list[cfg.Opt]:
    """What ``register_auth_opts`` registers, for sample files: keystoneauth's
    session and common options, and the password plugin's (a service user's)."""
    opts = ks_loading.get_session_conf_options() + ks_loading.get_auth_common_conf_options()
    names = {opt.dest for opt in opts}
    return opts + [opt for opt in ks_loading.get_auth_plugin_conf_options("password") if opt.dest not in names]


def load_session(conf: cfg.ConfigOpts, group: str, default_timeout: float | None = None) -> ks_session.Session:
    """The session of ``group``; ``default_timeout`` applies unless the group
    sets its own ``timeout`` (which then wins). The session's timeout bounds
    the Keystone token requests too."""
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    extra = {}
    if default_timeout is not None and conf[group].timeout is None:
        extra["timeout"] = default_timeout
    return ks_loading.load_session_from_conf_options(conf, group, auth=auth, **extra)


class RegionClients:
    """Lazily built, cached per region; building one never touches another."""

    def __init__(self, session: ks_session.Session, user_agent: str = "isthmus",
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        # A session's own timeout (its group's ``timeout`` option) wins; one
        # without gets ``timeout``, so token requests are bounded as well.
        if session.timeout is None:
            session.timeout = float(timeout)
        self.session = session
        self.timeout = session.timeout
        self.user_agent = user_agent
        self._neutron: dict[str, NeutronClient] = {}
        self._nova: dict[str, NovaClient] = {}
        self._lock = threading.Lock()

    def neutron(self, region: str) -> NeutronClient:
        with self._lock:
            if region not in self._neutron:
                self._neutron[region] = NeutronClient(self._adapter("network", region), region, self.timeout)
            return self._neutron[region]

    def nova(self, region: str) -> NovaClient:
        with self._lock:
            if region not in self._nova:
                self._nova[region] = NovaClient(self._adapter("compute", region), region, self.timeout)
            return self._nova[region]

    def _adapter(self, service_type: str, region: str) -> ks_adapter.Adapter:
        return ks_adapter.Adapter(
            self.session, service_type=service_type, interface=["internal", "public"],
            region_name=region, user_agent=self.user_agent,
            connect_retries=1, status_code_retries=1,
        )
