"""Config sections of Keystone and of the Isthmus services: the gateway,
``isthmus-xjob`` and the Admin API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from isthmus.configs.ini import MutableSections as Sections
from isthmus.configs.ini import ServiceUser, database, keystone_authtoken, service_client


@dataclass(frozen=True)
class KeystoneValues:
    database_connection: str
    fernet_key_repository: str
    credential_key_repository: str
    token_expiration: int = 86400
    # [token] allow_expired_window and [fernet_tokens] max_active_keys (None: keystone's
    # defaults, 172800 and 3); the operator sets both from its key rule (operator/fernet.py).
    allow_expired_window: int | None = None
    max_active_keys: int | None = None
    # bcrypt rounds; the sandbox uses 4 for fast logins, production leaves the default.
    password_hash_rounds: int | None = None
    memcache_servers: tuple[str, ...] = ()
    debug: bool = False


def keystone_conf(values: KeystoneValues) -> Sections:
    sections: Sections = {
        "DEFAULT": {"debug": values.debug},
        "database": database(values.database_connection),
        "token": {"provider": "fernet", "expiration": values.token_expiration,
                  "allow_expired_window": values.allow_expired_window},
        "fernet_tokens": {"key_repository": values.fernet_key_repository,
                          "max_active_keys": values.max_active_keys},
        # Auth receipts (MFA) are fernet too, from their own option whose default
        # is /etc/keystone/fernet-keys/: keystone-manage bootstrap exits when it is
        # missing. The same keys, as keystone's docs suggest.
        "fernet_receipts": {"key_repository": values.fernet_key_repository},
        "credential": {"key_repository": values.credential_key_repository},
        "identity": {"password_hash_rounds": values.password_hash_rounds},
    }
    if values.memcache_servers:
        sections["cache"] = {"enabled": True, "backend": "dogpile.cache.pymemcache",
                             "memcache_servers": list(values.memcache_servers)}
    return sections


@dataclass(frozen=True)
class GatewayValues:
    bind_host: str
    bind_port: int
    public_url: str
    central_region: str
    master_region: str
    database_connection: str
    # The ``isthmus`` service user, in the central region.
    service_user: ServiceUser
    list_timeout: int | None = 10
    catalog_ttl: int | None = 60
    # Which catalogue interface the gateway forwards to.
    interface: str = "public"
    debug: bool = False
    tls: TLSFiles | None = None  # serve https
    placement_policy: str | None = None  # None: the product default (fewest_projects)
    regions: tuple[str, ...] | None = None  # the regions behind it; None: every registered one


@dataclass(frozen=True)
class TLSFiles:
    """``[ssl]`` of a service that serves https (isthmus/tls.py)."""

    cert_file: str
    key_file: str


def ssl_section(tls: TLSFiles | None) -> Sections:
    return {"ssl": {"cert_file": tls.cert_file, "key_file": tls.key_file}} if tls else {}


def gateway_conf(values: GatewayValues) -> Sections:
    return {
        "DEFAULT": {"debug": values.debug},
        "gateway": {
            "bind_host": values.bind_host, "bind_port": values.bind_port,
            "public_url": values.public_url, "central_region": values.central_region,
            "master_region": values.master_region, "list_timeout": values.list_timeout,
            "catalog_ttl": values.catalog_ttl, "placement_policy": values.placement_policy,
            "regions": values.regions,
        },
        "database": {"connection": values.database_connection},
        "keystone_authtoken": keystone_authtoken(values.service_user),
        "service_credentials": {**service_client(values.service_user), "interface": values.interface},
        **ssl_section(values.tls),
    }


@dataclass(frozen=True)
class JobTuning:
    """``[jobs]`` knobs; None leaves the product default (isthmus/jobs/config.py)."""

    workers: int | None = None
    lease_seconds: float | None = None
    poll_interval: float | None = None
    retry_base_delay: float | None = None
    retry_max_delay: float | None = None
    max_attempts: int | None = None
    takeover_grace: float | None = None


# The sandbox favours quick convergence: short leases and resyncs. The takeover
# grace is its worker's call timeout (XJobValues.timeout): no shorter is safe.
SANDBOX_JOB_TUNING = JobTuning(workers=8, lease_seconds=20, poll_interval=0.5, retry_base_delay=1,
                               retry_max_delay=15, max_attempts=20, takeover_grace=30)


@dataclass(frozen=True)
class XJobValues:
    database_connection: str
    central_region: str
    service_user: ServiceUser
    jobs: JobTuning = JobTuning()
    resync_interval: float | None = None
    timeout: int = 30
    debug: bool = False
    # Prometheus /metrics of the worker (it has no other HTTP server); None: off.
    metrics_port: int | None = None
    metrics_bind_host: str = "127.0.0.1"
    # The gateway's master region: turns on the periodic resync of its global objects.
    gateway_master_region: str | None = None
    # ML2/OVN regions: region -> (Northbound, Southbound) connection (docs/ovn.md).
    ovn_regions: Mapping[str, tuple[str, str]] = field(default_factory=dict)


def xjob_conf(values: XJobValues) -> Sections:
    jobs = values.jobs
    return {
        "DEFAULT": {"debug": values.debug},
        "database": {"connection": values.database_connection},
        "jobs": {"workers": jobs.workers, "lease_seconds": jobs.lease_seconds, "poll_interval": jobs.poll_interval,
                 "retry_base_delay": jobs.retry_base_delay, "retry_max_delay": jobs.retry_max_delay,
                 "max_attempts": jobs.max_attempts, "takeover_grace": jobs.takeover_grace},
        "isthmus": {"central_region": values.central_region, "resync_interval": values.resync_interval},
        "isthmus_service": {**service_client(values.service_user), "timeout": values.timeout},
        **({"metrics": {"port": values.metrics_port, "bind_host": values.metrics_bind_host}}
           if values.metrics_port is not None else {}),
        **({"gateway_sync": {"master_region": values.gateway_master_region}}
           if values.gateway_master_region else {}),
        **{f"ovn:{region}": {"nb_connection": nb, "sb_connection": sb}
           for region, (nb, sb) in sorted(values.ovn_regions.items())},
    }


@dataclass(frozen=True)
class AdminAPIValues:
    bind_host: str
    bind_port: int
    database_connection: str
    service_user: ServiceUser
    debug: bool = False
    tls: TLSFiles | None = None  # serve https


def admin_api_conf(values: AdminAPIValues) -> Sections:
    return {
        "DEFAULT": {"debug": values.debug, "bind_host": values.bind_host, "bind_port": values.bind_port},
        "database": {"connection": values.database_connection},
        "keystone_authtoken": keystone_authtoken(values.service_user),
        **ssl_section(values.tls),
    }
