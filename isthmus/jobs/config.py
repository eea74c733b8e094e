"""oslo.config options of the job engine and the ``isthmus-xjob`` worker."""

from __future__ import annotations

from oslo_config import cfg

from isthmus.jobs.backoff import RetryPolicy

DEFAULT_CONNECTION = "sqlite:////var/lib/isthmus/isthmus.sqlite"

database_opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "connection",
        secret=True,
        default=DEFAULT_CONNECTION,
        help="SQLAlchemy URL of the Isthmus database. SQLite (the default) suits one "
        "host; use postgresql+psycopg2:// or mysql+pymysql:// for workers on several hosts.",
    ),
]

jobs_opts: list[cfg.Opt] = [
    cfg.IntOpt("workers", default=4, min=1, help="Jobs run at once by one worker process (threads)."),
    cfg.FloatOpt(
        "lease_seconds",
        default=60.0,
        min=0.1,
        help="A running job's lease; renewed every third of it. A worker that dies "
        "leaves its jobs to others once this has passed.",
    ),
    cfg.FloatOpt(
        "takeover_grace",
        default=60.0,
        min=0,
        help="Seconds past a lease's expiry before another worker takes the job over. Its old "
        "holder starts no call once the lease has expired, but one started just before may "
        "still land: this must be at least the longest call a handler makes (the region and "
        "database timeouts). Lease times are the database server's, so workers' clocks may differ.",
    ),
    cfg.FloatOpt(
        "run_deadline",
        default=300.0,
        min=0.1,
        help="Seconds a job run may take, for job types that declare no deadline. Past it the "
        "handler is asked to stop (its next region call raises) and the job runs again later; "
        "not counted as a failure.",
    ),
    cfg.FloatOpt("poll_interval", default=1.0, min=0.01, help="Seconds between polls for due jobs."),
    cfg.IntOpt("max_attempts", default=8, min=1, help="Failed runs before a job is FAIL."),
    cfg.FloatOpt("retry_base_delay", default=2.0, min=0, help="Backoff after the first failure."),
    cfg.FloatOpt("retry_max_delay", default=300.0, min=0, help="Cap of the exponential backoff."),
    cfg.FloatOpt("retry_jitter", default=0.1, min=0, max=1, help="Random spread of backoff delays (fraction)."),
    cfg.FloatOpt(
        "shutdown_grace",
        default=30.0,
        min=0,
        help="On SIGTERM, seconds to let running jobs finish before they are released.",
    ),
    cfg.FloatOpt("sqlite_busy_timeout", default=30.0, min=0, help="SQLite: seconds a writer waits for the lock."),
    cfg.BoolOpt("resync_enabled", default=True, help="Run the periodic resyncs that handlers declare."),
    cfg.ListOpt(
        "handler_modules",
        default=[],
        help="Modules defining register_handlers(registry), besides the "
        "'isthmus.jobs.handlers' entry points.",
    ),
    cfg.BoolOpt("load_entry_points", default=True, help="Load handlers from 'isthmus.jobs.handlers' entry points."),
    cfg.StrOpt("worker_name", help="Lease owner name; default host:pid:random."),
]

metrics_opts: list[cfg.Opt] = [
    cfg.PortOpt("port", default=0, help="Serve Prometheus metrics on http://bind_host:port/metrics "
                "(docs/metrics.md); 0: no metrics endpoint."),
    cfg.HostAddressOpt("bind_host", default="127.0.0.1", help="Address of the metrics endpoint."),
]

cli_opts = [cfg.BoolOpt("debug", short="d", default=False, help="Debug logging.")]


def register_database_opts(conf: cfg.ConfigOpts) -> None:
    """``[database]`` alone: for services that use the Isthmus DB but run no jobs."""
    for opt in database_opts:
        try:
            conf.register_opt(opt, group="database")
        except cfg.DuplicateOptError:
            pass  # already registered differently (e.g. by oslo.db): use that one


def register_opts(conf: cfg.ConfigOpts) -> None:
    register_database_opts(conf)
    conf.register_opts(jobs_opts, group="jobs")
    conf.register_opts(metrics_opts, group="metrics")


def retry_policy(conf: cfg.ConfigOpts) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=conf.jobs.max_attempts,
        base_delay=conf.jobs.retry_base_delay,
        max_delay=conf.jobs.retry_max_delay,
        jitter=conf.jobs.retry_jitter,
    )


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """For oslo-config-generator."""
    return [("database", database_opts), ("jobs", jobs_opts), ("metrics", metrics_opts)]
