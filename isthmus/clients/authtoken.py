"""keystonemiddleware's ``auth_token`` with a bounded wait on Keystone.

Its ``[keystone_authtoken] http_connect_timeout`` defaults to none: a Keystone
that accepts connections and never answers would hang every request thread
that validates a token. Isthmus' services default it here (an operator's own
value wins); the rendered configs of the OpenStack services set it as well.
"""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

GROUP = "keystone_authtoken"
KEYSTONE_TIMEOUT = 10  # seconds per Keystone request (token validation, the service's own token)


def auth_token_middleware(app: Any, conf: cfg.ConfigOpts, **local: str) -> Any:
    """``auth_token.AuthProtocol(app, ...)`` reading ``conf``, with the timeout defaulted."""
    from keystonemiddleware import auth_token

    for group, opts in auth_token.list_opts():  # public, for oslo-config-generator
        try:
            conf.register_opts(opts, group=group)
        except cfg.DuplicateOptError:
            pass  # registered before, by an earlier middleware on this conf
    conf.set_default("http_connect_timeout", KEYSTONE_TIMEOUT, group=GROUP)
    return auth_token.AuthProtocol(app, {"oslo_config_config": conf, **local})
