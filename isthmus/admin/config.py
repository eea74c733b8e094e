"""oslo.config options of the Admin API (``isthmus-admin``).

``[database] connection`` and ``[jobs] handler_modules``/``load_entry_points``
are the job engine's own options (:mod:`isthmus.jobs.config`), registered here
through it: the API and ``isthmus-xjob`` read one configuration file and must
agree on the database and on which job types exist.
"""

from __future__ import annotations

from oslo_config import cfg

from isthmus import tls
from isthmus.jobs import config as jobs_config

DEFAULT_PORT = 19999  # Tricircle's Admin API port

api_opts = [
    cfg.HostAddressOpt("bind_host", default="0.0.0.0", help="Address the Admin API listens on."),
    cfg.PortOpt("bind_port", default=DEFAULT_PORT, help="Port the Admin API listens on."),
    cfg.IntOpt("api_workers", default=2, min=1, help="Worker processes of isthmus-admin."),
    cfg.IntOpt("api_threads", default=8, min=1, help="Threads per worker process."),
    cfg.IntOpt(
        "pagination_max_limit",
        default=1000,
        min=1,
        help="Default and maximum page size of the routing and job lists "
        "(a larger ?limit= is capped to it).",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(api_opts)
    jobs_config.register_opts(conf)  # [database] connection (once), [jobs]
    tls.register_opts(conf)  # [ssl]: serve https


def list_opts() -> list[tuple[str | None, list[cfg.Opt]]]:
    """For oslo-config-generator."""
    return [(None, api_opts), *jobs_config.list_opts(), (tls.GROUP, tls.OPTS)]
