"""Service entry points of the Admin API.

- ``init_application(config_files)`` builds the WSGI pipeline (the factory);
- ``application`` (module attribute, built on first access) serves mod_wsgi/uWSGI;
  it reads the files named in ``OS_ISTHMUS_CONFIG_FILES`` (``;``-separated),
  else oslo.config's usual search (``/etc/isthmus/isthmus.conf``, ...);
- ``main()`` is the ``isthmus-admin`` console script: it parses
  ``--config-file``/``--config-dir`` and serves with gunicorn (threaded workers)
  on ``[DEFAULT] bind_host:bind_port``.

Pipeline, outermost first: ``/metrics`` and request metrics (:mod:`isthmus.admin.metrics`),
oslo.middleware ``request_id`` (every answer carries
``x-openstack-request-id``), ``http_proxy_to_wsgi`` (honours X-Forwarded-* when
``[oslo_middleware] enable_proxy_headers_parsing``), ``sizelimit`` (``[oslo_middleware]
max_request_body_size``), keystonemiddleware ``auth_token`` (``[keystone_authtoken]``,
with ``delay_auth_decision``: the app itself answers 401, as JSON, and the
middleware adds ``WWW-Authenticate``), then :class:`~isthmus.admin.app.AdminApi`.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from oslo_config import cfg

LOG = logging.getLogger(__name__)

PROJECT = "isthmus"
PROG = "isthmus-admin"
CONFIG_FILES_ENV = "OS_ISTHMUS_CONFIG_FILES"


def make_conf(args: Sequence[str] = (), config_files: Sequence[str] | None = None) -> cfg.ConfigOpts:
    """A private ConfigOpts (never the global one) with every option registered and parsed."""
    from oslo_log import log as oslo_log

    from isthmus.admin import config

    conf = cfg.ConfigOpts()
    config.register_opts(conf)
    oslo_log.register_options(conf)
    conf(list(args), project=PROJECT, prog=PROG,
         default_config_files=list(config_files) if config_files is not None else None)
    return conf


def _config_files_from_env() -> list[str] | None:
    """``OS_ISTHMUS_CONFIG_FILES``, or None for oslo.config's search path."""
    named = os.environ.get(CONFIG_FILES_ENV)
    return [p for p in named.split(";") if p] if named else None


def build_app(conf: cfg.ConfigOpts, engine: Any = None, handlers: Any = None) -> Any:
    """The full pipeline for ``conf``. ``engine``/``handlers`` may be injected (tests)."""
    from oslo_middleware import http_proxy_to_wsgi, request_id, sizelimit

    from isthmus import jobs, registry
    from isthmus.admin.app import AdminApi
    from isthmus.admin.metrics import MetricsMiddleware
    from isthmus.admin.policy import make_enforcer
    from isthmus.clients.authtoken import auth_token_middleware
    from isthmus.db import make_engine
    from isthmus.db.migration import require_current
    from isthmus.jobs.loader import load_handlers

    if engine is None:
        engine = make_engine(conf.database.connection, busy_timeout=conf.jobs.sqlite_busy_timeout)
        require_current(engine, PROG)
    if handlers is None:
        # The same handlers as isthmus-xjob (same options): the API only needs their
        # types and resource keys, never runs them.
        handlers = load_handlers(jobs.HandlerRegistry(), conf.jobs.handler_modules,
                                 use_entry_points=conf.jobs.load_entry_points, conf=conf)
    core = AdminApi(registry.Registry(engine), jobs.JobStore(engine), handlers, make_enforcer(conf),
                    max_limit=conf.pagination_max_limit)
    app: Any = auth_token_middleware(core, conf, delay_auth_decision="true")
    app = sizelimit.RequestBodySizeLimiter(app, conf)
    app = http_proxy_to_wsgi.HTTPProxyToWSGI(app, conf)
    app = request_id.RequestId(app)
    app = MetricsMiddleware(app)
    LOG.info("isthmus-admin: database %s, job types: %s", engine.url.render_as_string(hide_password=True),
             ", ".join(handlers.job_types()) or "none")
    return app


def init_application(config_files: Sequence[str] | None = None) -> Any:
    """WSGI factory: parse the configuration, set up logging, build the pipeline."""
    from oslo_log import log as oslo_log

    conf = make_conf((), _config_files_from_env() if config_files is None else config_files)
    oslo_log.setup(conf, PROJECT)
    return build_app(conf)


_application: Any = None


def __getattr__(name: str) -> Any:
    """``application`` is built on first access, not at import (PEP 562)."""
    global _application
    if name == "application":
        if _application is None:
            _application = init_application()
        return _application
    raise AttributeError(name)


def main(argv: Sequence[str] | None = None) -> int:
    """``isthmus-admin --config-file /etc/isthmus/isthmus.conf``."""
    from gunicorn.app.base import BaseApplication
    from oslo_log import log as oslo_log

    from isthmus import tls
    from isthmus.db import make_engine
    from isthmus.db.migration import SchemaOutdated, require_current

    conf = make_conf(sys.argv[1:] if argv is None else argv)
    oslo_log.setup(conf, PROJECT)
    engine = make_engine(conf.database.connection)
    try:  # once here, so a stale schema is one line, not a failed boot per worker
        require_current(engine, PROG)
    except SchemaOutdated as exc:
        LOG.error("%s", exc)
        return 2
    finally:
        engine.dispose()

    class Server(BaseApplication):
        def load_config(self) -> None:
            self.cfg.set("bind", f"{conf.bind_host}:{conf.bind_port}")
            self.cfg.set("workers", conf.api_workers)
            self.cfg.set("worker_class", "gthread")
            self.cfg.set("threads", conf.api_threads)
            self.cfg.set("proc_name", PROG)
            self.cfg.set("keepalive", 75)
            if conf.ssl.cert_file or conf.ssl.key_file:  # [ssl]: https only (isthmus/tls.py)
                tls.server_context(conf)  # the same checks as the gateway's, before binding
                self.cfg.set("certfile", conf.ssl.cert_file)
                self.cfg.set("keyfile", conf.ssl.key_file)
                if conf.ssl.ca_file:
                    self.cfg.set("ca_certs", conf.ssl.ca_file)
                    self.cfg.set("cert_reqs", 2)  # ssl.CERT_REQUIRED
            # gunicorn >= 27 otherwise opens one control socket per user, shared
            # by every gunicorn of that user on the host.
            if "control_socket_disable" in self.cfg.settings:
                self.cfg.set("control_socket_disable", True)

        def load(self) -> Any:
            return build_app(conf)  # per worker: no database connection crosses a fork

    LOG.info("%s listening on %s:%s", PROG, conf.bind_host, conf.bind_port)
    Server().run()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
