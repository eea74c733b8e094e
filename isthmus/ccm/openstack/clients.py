"""OpenStack clients: one Keystone session, lazy isolated per-region clients.

One keystoneauth session authenticates once (and re-authenticates) for all
regions; each region gets its own openstacksdk ``Connection`` built on that
session, created on first use and cached. A region that is missing from the
catalog or down raises :class:`RegionError` for the lookups that need it and
nothing else: other regions keep working, and a failed creation is not
cached, so a region that comes back is used again without a restart.
(cloud-provider-openstack's multi-region pull request built every region
eagerly and gave up on all of them if one failed.)

A region that does not answer at all costs a full ``request-timeout`` per
call, and the controllers work through nodes one by one: a hung region would
stall every node of every region. So a timeout opens that region's
:class:`RegionBreaker` for a while; its calls then fail at once (still an
error, never "not found"), and the first call after the pause probes it
again while the others keep failing fast until it answers. Refused
connections and HTTP errors fail fast on their own and do not open it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from isthmus.breaker import Breaker
from isthmus.ccm.config import AuthOptions, CloudConfig
from isthmus.ccm.errors import RegionError
from isthmus.ccm.openstack.model import Flavor, Network, Port, Server, ServerAddress

LOG = logging.getLogger(__name__)

SERVICES = ("compute", "network")
USER_AGENT = "isthmus-ccm"


def build_auth(opts: AuthOptions) -> Any:
    """A keystoneauth plugin for the ``[Global]`` credentials.

    Application credentials, then a token, then a password (trust-scoped when
    ``trust-id`` is set), as OCCM picks them. ``domain-*`` is the fallback for
    both the user's and the project's domain.
    """
    from keystoneauth1.identity import generic, v3

    if opts.application_credential_id or opts.application_credential_name:
        return v3.ApplicationCredential(
            auth_url=opts.auth_url,
            application_credential_secret=opts.application_credential_secret,
            application_credential_id=opts.application_credential_id or None,
            application_credential_name=opts.application_credential_name or None,
            user_id=opts.user_id or None,
            username=opts.username or None,
            user_domain_id=opts.user_domain_id or opts.domain_id or None,
            user_domain_name=opts.user_domain_name or opts.domain_name or None,
        )
    project_scoped = bool(opts.tenant_id or opts.tenant_name)
    scope: dict[str, Any] = {
        "project_id": opts.tenant_id or None,
        "project_name": opts.tenant_name or None,
        "project_domain_id": opts.tenant_domain_id or opts.domain_id or None,
        "project_domain_name": opts.tenant_domain_name or opts.domain_name or None,
        "trust_id": opts.trust_id or None,
    }
    if not project_scoped and not opts.trust_id:
        scope.update(domain_id=opts.domain_id or None, domain_name=opts.domain_name or None)
    if opts.token:
        return generic.Token(auth_url=opts.auth_url, token=opts.token, **scope)
    return generic.Password(
        auth_url=opts.auth_url,
        user_id=opts.user_id or None,
        username=opts.username or None,
        password=opts.password,
        user_domain_id=opts.user_domain_id or opts.domain_id or None,
        user_domain_name=opts.user_domain_name or opts.domain_name or None,
        **scope,
    )


def build_session(config: CloudConfig, auth: Any | None = None) -> Any:
    """The one session; ``[Metadata] request-timeout`` bounds every API call."""
    from keystoneauth1 import session

    opts = config.global_
    verify: bool | str = opts.ca_file or opts.verify_tls
    if not opts.verify_tls:
        verify = False
    cert = (opts.cert_file, opts.key_file) if opts.cert_file and opts.key_file else opts.cert_file or None
    return session.Session(
        auth=auth if auth is not None else build_auth(opts),
        verify=verify,
        cert=cert,
        timeout=config.metadata.request_timeout,
        app_name=USER_AGENT,
    )


class RegionBreaker:
    """A circuit breaker per region (:class:`isthmus.breaker.Breaker`, the one the
    gateway and the worker use): after a timeout the region's calls fail at once
    for ``cooldown`` seconds, then one call probes it while the others keep
    failing fast, so a hung region costs one timeout per ``cooldown`` instead of
    one per node. Only timeouts open it (refused connections and HTTP errors
    fail fast on their own); a timeout while the region answered other calls is
    a busy region, not a hung one, and does not count. ``cooldown`` 0: never open."""

    def __init__(self, cooldown: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.cooldown = cooldown
        self.clock = clock
        self._breakers: dict[str, Breaker] = {}
        self._reasons: dict[str, str] = {}
        self._lock = threading.Lock()

    def _of(self, region: str) -> Breaker:
        with self._lock:
            breaker = self._breakers.get(region)
            if breaker is None:
                breaker = self._breakers[region] = Breaker(cooldown=self.cooldown, clock=self.clock)
            return breaker

    def _refused(self, region: str, left: float) -> RegionError:
        return RegionError(region, f"not asked for {left:.0f}s more after a timeout ({self._reasons.get(region)})")

    def check(self, region: str) -> None:
        """Raise while the region's calls fail at once; admits no call (see ``admit``)."""
        left = self._of(region).open_for() if self.cooldown > 0 else 0.0
        if left > 0:
            raise self._refused(region, left)

    def admit(self, region: str) -> float | None:
        """Before a call: raise while the region's calls fail at once (the call
        after the cooldown is the probe). Returns the call's start on the
        breaker's clock, to give back to ``timed_out``."""
        if self.cooldown <= 0:
            return None
        breaker = self._of(region)
        left = breaker.admit()
        if left > 0:
            raise self._refused(region, left)
        return breaker.now()

    def answered(self, region: str) -> None:
        if self.cooldown > 0:
            self._of(region).succeeded()

    def no_verdict(self, region: str) -> None:
        """The call ended without telling whether the region is up (refused, or failed before asking)."""
        if self.cooldown > 0:
            self._of(region).abandoned()

    def timed_out(self, region: str, reason: str, since: float | None = None) -> None:
        if self.cooldown <= 0:
            return
        breaker = self._of(region)
        self._reasons[region] = reason
        breaker.failed(since=since)
        if breaker.state() == "open":
            LOG.warning("region %s timed out (%s): its calls fail at once for %.0fs", region, reason, self.cooldown)

    def is_open(self, region: str) -> bool:
        """Whether ``region``'s calls fail at once now (the metrics' breaker state)."""
        return self.cooldown > 0 and self._of(region).state() == "open"


# Told of every OpenStack call: (region, result, seconds); results as in isthmus.ccm.health.
Observe = Callable[[str, str, float], None]


def _no_observe(region: str, result: str, seconds: float) -> None:
    pass


@contextmanager
def region_errors(region: str, what: str, breaker: RegionBreaker | None = None,
                   observe: Observe = _no_observe) -> Iterator[None]:
    """Turn any SDK / keystoneauth failure into a RegionError for ``region``.

    A timeout also trips ``breaker`` for the region. ``observe`` hears how
    the call ended (ok: any answer, a 404 included).
    """
    from keystoneauth1 import exceptions as ksa_exc
    from openstack import exceptions as sdk_exc

    since = None
    if breaker is not None:
        try:
            since = breaker.admit(region)
        except RegionError:
            observe(region, "paused", 0.0)
            raise
    started = time.monotonic()
    result = "error"
    verdict = "none"  # what the call tells of the region: answered, timed_out, or nothing
    try:
        yield
        result, verdict = "ok", "answered"
    except RegionError:
        raise
    except ksa_exc.ConnectTimeout as exc:  # keystoneauth's name for connect *and* read timeouts
        result, verdict = "timeout", "timed_out"
        raise RegionError(region, f"{what}: {_one_line(exc)}") from exc
    except sdk_exc.HttpException as exc:
        verdict = "answered"  # an HTTP error is an answer: the region is up
        raise RegionError(region, f"{what}: {_one_line(exc)}") from exc
    except (sdk_exc.SDKException, ksa_exc.ClientException) as exc:
        raise RegionError(region, f"{what}: {_one_line(exc)}") from exc
    finally:
        if breaker is not None:
            if verdict == "answered":
                breaker.answered(region)
            elif verdict == "timed_out":
                breaker.timed_out(region, f"{what} timed out", since)
            else:
                breaker.no_verdict(region)
        observe(region, result, time.monotonic() - started)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def get_or_none(region: str, what: str, fetch: Callable[[], Any], breaker: RegionBreaker | None = None,
                 observe: Observe = _no_observe) -> Any | None:
    """``fetch()``, with 404 as ``None`` and other failures as RegionError."""
    from openstack import exceptions as sdk_exc

    with region_errors(region, what, breaker, observe):
        try:
            return fetch()
        except sdk_exc.NotFoundException:
            return None  # an answer: counted as ok


# Go's regexp.QuoteMeta set: Nova treats the name filter as a regex.
_REGEX_META = re.compile(r"([\\.+*?()|\[\]{}^$])")


def exact_name_filter(name: str) -> str:
    escaped = _REGEX_META.sub(r"\\\1", name)
    return f"^{escaped}$"


def to_server(raw: Any) -> Server:
    """An openstacksdk Server resource as a plain record."""
    flavor = raw.flavor
    flavor_ref: dict[str, str] = {}
    if flavor is not None:
        # From compute 2.47 Nova embeds the flavor (original_name, no id).
        if flavor.original_name:
            flavor_ref["original_name"] = flavor.original_name
        elif flavor.id:
            flavor_ref["id"] = flavor.id
    addresses = {
        net: tuple(ServerAddress(str(e.get("addr", "")), str(e.get("OS-EXT-IPS:type") or "")) for e in entries)
        for net, entries in (raw.addresses or {}).items()
    }
    return Server(
        id=raw.id,
        name=raw.name or "",
        status=raw.status or "",
        availability_zone=raw.availability_zone or "",
        flavor=flavor_ref,
        addresses=addresses,
        access_ipv4=raw.access_ipv4 or "",
        access_ipv6=raw.access_ipv6 or "",
        metadata={str(k): str(v) for k, v in (raw.metadata or {}).items()},
    )


def to_port(raw: Any) -> Port:
    trunk = raw.trunk_details or {}
    return Port(
        id=raw.id,
        status=raw.status or "",
        fixed_ips=tuple(ip["ip_address"] for ip in (raw.fixed_ips or []) if ip.get("ip_address")),
        network_id=raw.network_id or "",
        subport_ids=tuple(sp["port_id"] for sp in trunk.get("sub_ports") or [] if sp.get("port_id")),
    )


class OpenStackRegionClient:
    """:class:`~isthmus.ccm.openstack.instances.RegionClient` over an openstacksdk Connection."""

    def __init__(self, region: str, connection: Any, breaker: RegionBreaker | None = None,
                 observe: Observe = _no_observe) -> None:
        self.region = region
        self._conn = connection
        self._breaker = breaker
        self._observe = observe

    def _get(self, what: str, fetch: Callable[[], Any]) -> Any | None:
        return get_or_none(self.region, what, fetch, self._breaker, self._observe)

    def _errors(self, what: str) -> Any:
        return region_errors(self.region, what, self._breaker, self._observe)

    def get_server(self, server_id: str) -> Server | None:
        raw = self._get(f"GET server {server_id}", lambda: self._conn.compute.get_server(server_id))
        return None if raw is None else to_server(raw)

    def find_servers(self, name: str) -> list[Server]:
        with self._errors(f"list servers named {name!r}"):
            found = [to_server(s) for s in self._conn.compute.servers(details=True, name=exact_name_filter(name))]
        # Nova's regex match may differ from ours (collation, engine): keep exact names only.
        return [s for s in found if s.name == name]

    def get_flavor(self, flavor_id: str) -> Flavor | None:
        raw = self._get(f"GET flavor {flavor_id}", lambda: self._conn.compute.get_flavor(flavor_id))
        return None if raw is None else Flavor(id=raw.id, name=raw.name or "")

    def find_flavor(self, name: str) -> Flavor | None:
        # Nova's flavor list has no name filter: every page, matched here.
        with self._errors(f"list flavors for {name!r}"):
            found = [f for f in self._conn.compute.flavors(details=False, is_public=None) if f.name == name]
        return Flavor(id=found[0].id, name=found[0].name) if len(found) == 1 else None

    def list_ports(self, device_id: str) -> list[Port]:
        with self._errors(f"list ports of {device_id}"):
            return [to_port(p) for p in self._conn.network.ports(device_id=device_id)]

    def get_port(self, port_id: str) -> Port | None:
        raw = self._get(f"GET port {port_id}", lambda: self._conn.network.get_port(port_id))
        return None if raw is None else to_port(raw)

    def get_network(self, network_id: str) -> Network | None:
        raw = self._get(f"GET network {network_id}", lambda: self._conn.network.get_network(network_id))
        return None if raw is None else Network(id=raw.id, name=raw.name or "")


def sdk_connection(session: Any, region: str, interface: str) -> Any:
    from openstack import connection

    return connection.Connection(session=session, region_name=region, interface=interface)


T = TypeVar("T")


class RegionCache(Generic[T]):
    """Objects built lazily, once per configured region, behind a region breaker: an
    open breaker refuses at once, an unknown region is an error, a failed build is
    retried on the next call (nothing is cached for it)."""

    def __init__(self, regions: tuple[str, ...], breaker: RegionBreaker) -> None:
        self.regions = regions
        self.breaker = breaker
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()

    def get(self, region: str, build: Callable[[], T]) -> T:
        self.breaker.check(region)
        with self._lock:
            cached = self._items.get(region)
        if cached is not None:
            return cached
        if region not in self.regions:
            raise RegionError(region, "not a configured region")
        created = build()  # outside the lock: a slow region must not hold up the others
        with self._lock:
            return self._items.setdefault(region, created)


class OpenStackClients:
    """Per-region clients on one session; implements ``RegionClients``."""

    def __init__(
        self,
        session: Any,
        regions: tuple[str, ...],
        interface: str = "public",
        connect: Callable[[Any, str, str], Any] = sdk_connection,
        breaker: RegionBreaker | None = None,
        observe: Observe = _no_observe,
    ) -> None:
        self.session = session
        self.observe = observe
        self.breaker = breaker if breaker is not None else RegionBreaker()
        self.regions = regions
        self.interface = interface
        self._connect = connect
        self._clients: RegionCache[OpenStackRegionClient] = RegionCache(regions, self.breaker)

    @classmethod
    def from_config(cls, config: CloudConfig) -> OpenStackClients:
        return cls(build_session(config), config.regions, config.global_.interface)

    def client(self, region: str) -> OpenStackRegionClient:
        return self._clients.get(region, lambda: self._build(region))

    def _build(self, region: str) -> OpenStackRegionClient:
        self._check_catalog(region)
        return OpenStackRegionClient(region, self._connect(self.session, region, self.interface), self.breaker,
                                     lambda *a: self.observe(*a))  # late-bound: metrics may come later

    def _check_catalog(self, region: str) -> None:
        """Fail early, and by name, if the catalog lacks this region's services.

        This reads the token's catalog: one Keystone call shared by all
        regions, none once the token is cached.
        """
        from keystoneauth1 import exceptions as ksa_exc

        for service in SERVICES:
            with region_errors(region, f"{service} endpoint lookup"):
                try:
                    url = self.session.get_endpoint(service_type=service, interface=self.interface, region_name=region)
                except ksa_exc.EndpointNotFound:
                    url = None
            if not url:
                raise RegionError(region, f"no {service} endpoint ({self.interface}) in the service catalog")

    def check(self) -> dict[str, str | None]:
        """Region -> error text, or None if usable; for a startup report."""
        report: dict[str, str | None] = {}
        for region in self.regions:
            try:
                self.client(region)
            except RegionError as exc:
                report[region] = exc.message
            else:
                report[region] = None
        return report

    def unknown_regions(self) -> list[str]:
        """Configured regions Keystone does not know: a misspelt ``regions=`` entry.

        A region in no endpoint of the token's catalog is asked about by id
        (``GET /v3/regions/{id}``, open to any token by Keystone's default policy):
        only a 404 makes it unknown. A region that is down keeps its endpoints in
        the catalog, so an outage is never taken for a typo."""
        catalog = self.session.auth.get_access(self.session).service_catalog
        listed = {endpoint.get("region_id") or endpoint.get("region")
                  for service in catalog.catalog for endpoint in service.get("endpoints") or []}
        unknown = []
        for region in self.regions:
            if region in listed:
                continue
            reply = self.session.get(f"/regions/{quote(region, safe='')}", raise_exc=False,
                                     endpoint_filter={"service_type": "identity", "interface": self.interface,
                                                      "version": (3, 0)})
            if reply.status_code == 404:
                unknown.append(region)
        return unknown
