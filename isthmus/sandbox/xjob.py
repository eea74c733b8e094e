"""The Isthmus job worker (``isthmus-xjob``) of the sandbox."""

from __future__ import annotations

from pathlib import Path

from isthmus.configs.ini import ISTHMUS_USER, ServiceUser
from isthmus.configs.services import SANDBOX_JOB_TUNING, XJobValues, xjob_conf
from isthmus.sandbox import config_files, gateway, ovn, process, runtime
from isthmus.sandbox.layout import CENTRAL_REGION, PASSWORD, Layout, xjob_name


def config_path(layout: Layout, worker: int = 1) -> Path:
    return layout.etc / "isthmus" / ("xjob.conf" if worker == 1 else f"xjob-{worker}.conf")


def values(layout: Layout, worker: int = 1) -> XJobValues:
    # Short leases and resyncs: the sandbox favours quick convergence.
    return XJobValues(database_connection=layout.isthmus_db_url, central_region=CENTRAL_REGION,
                      service_user=ServiceUser(layout.auth_url, ISTHMUS_USER, PASSWORD, CENTRAL_REGION),
                      jobs=SANDBOX_JOB_TUNING, resync_interval=30, timeout=30,
                      metrics_port=layout.xjob_metrics_port_of(worker),
                      gateway_master_region=gateway.master_region(layout),
                      ovn_regions={r: (ovn.nb_connection(layout, r), ovn.sb_connection(layout, r))
                                   for r in layout.ovn_regions})


def write_config(layout: Layout, worker: int = 1) -> Path:
    return config_files.write(config_path(layout, worker), xjob_conf(values(layout, worker)))


def config_dir(layout: Layout) -> Path:
    """Operator overrides (``*.conf``), read after xjob.conf, kept across restarts
    (``isthmus sandbox restart isthmus-xjob`` rewrites xjob.conf only); every worker reads them."""
    return layout.etc / "isthmus" / "xjob.conf.d"


def start(layout: Layout, worker: int = 1) -> process.ServiceRecord:
    """Job worker ``worker`` (1 to ``layout.xjob_workers``); they differ only in
    their metrics port."""
    conf = write_config(layout, worker)
    config_dir(layout).mkdir(parents=True, exist_ok=True)
    return runtime.start_daemon(layout, xjob_name(worker), [runtime.tool("isthmus-xjob"), "--config-file", str(conf),
                                                           "--config-dir", str(config_dir(layout))])
