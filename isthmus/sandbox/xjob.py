"""The Isthmus job worker (``isthmus-xjob``) of the sandbox."""

from __future__ import annotations

from pathlib import Path

from isthmus.sandbox import ini, process, runtime
from isthmus.sandbox.layout import CENTRAL_REGION, PASSWORD, Layout


def config_path(layout: Layout) -> Path:
    return layout.etc / "isthmus" / "xjob.conf"


def write_config(layout: Layout) -> Path:
    return ini.write(config_path(layout), {
        "DEFAULT": {"debug": False},
        "database": {"connection": layout.isthmus_db_url},
        # Short leases and resyncs: the sandbox favours quick convergence.
        "jobs": {"workers": 8, "lease_seconds": 20, "poll_interval": 0.5, "retry_base_delay": 1,
                 "retry_max_delay": 15, "max_attempts": 20},
        "isthmus": {"central_region": CENTRAL_REGION, "resync_interval": 30},
        "isthmus_service": {**ini.service_client(layout.auth_url, "isthmus", PASSWORD, CENTRAL_REGION), "timeout": 30},
    })


def config_dir(layout: Layout) -> Path:
    """Operator overrides (``*.conf``), read after xjob.conf, kept across restarts
    (``isthmus sandbox restart isthmus-xjob`` rewrites xjob.conf only)."""
    return layout.etc / "isthmus" / "xjob.conf.d"


def start(layout: Layout) -> process.ServiceRecord:
    conf = write_config(layout)
    config_dir(layout).mkdir(parents=True, exist_ok=True)
    return runtime.start_daemon(layout, "isthmus-xjob", [runtime.tool("isthmus-xjob"), "--config-file", str(conf),
                                                         "--config-dir", str(config_dir(layout))])
