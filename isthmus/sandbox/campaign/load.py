"""Steady user load on the sandbox while faults come and go, and its ledger:
what the user made and deleted (the truth the invariants compare with) and
every request's outcome, by region."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LOG = logging.getLogger(__name__)
CENTRAL = "CentralRegion"


@dataclass(frozen=True)
class Request:
    at: float  # time.monotonic()
    region: str
    kind: str
    ok: bool
    error: str = ""


@dataclass
class Ledger:
    """What the user believes exists: created (and not deleted) servers and ports.
    A create whose answer was lost is *unknown*, never counted either way."""

    servers: dict[str, str] = field(default_factory=dict)  # server id -> region
    ports: set[str] = field(default_factory=set)  # central ports the user made
    deleted_servers: dict[str, str] = field(default_factory=dict)
    deleted_ports: set[str] = field(default_factory=set)
    # A delete whose answer was lost may or may not have happened: never counted.
    doubtful: set[str] = field(default_factory=set)
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note(self, region: str, kind: str, ok: bool, error: str = "") -> None:
        with self.lock:
            self.requests.append(Request(time.monotonic(), region, kind, ok, error[:300]))

    def failures(self, since: float, until: float, faulted: frozenset[str]) -> list[Request]:
        """Requests that failed between the two instants in regions not faulted."""
        if "*" in faulted:
            return []
        with self.lock:
            return [r for r in self.requests if since <= r.at <= until and not r.ok and r.region not in faulted]


class Load:
    """One thread of user requests, seeded: boots and deletes in every region,
    ports and their updates at central, security-group rule changes."""

    def __init__(self, connect: Callable[[str], Any], regions: tuple[str, ...], network: Any, group: Any,
                 ledger: Ledger, seed: int, max_servers: int = 6, max_ports: int = 6,
                 pause: float = 1.0) -> None:
        self.connect = connect
        self.regions = regions
        self.network = network
        self.group = group
        self.ledger = ledger
        self.random = random.Random(seed)
        self.max_servers = max_servers
        self.max_ports = max_ports
        self.pause = pause
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._image: Any = None
        self._flavor: Any = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="campaign-load", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(300)

    def _run(self) -> None:
        while not self._stop.is_set():
            operation = self.random.choice([self.boot, self.boot, self.delete_server, self.create_port,
                                            self.update_port, self.delete_port, self.toggle_rule])
            try:
                operation()
            except Exception as err:  # noqa: BLE001 - a request that failed is recorded, not fatal
                LOG.debug("load: %s: %s", operation.__name__, err)
            self._stop.wait(self.pause)

    def _call(self, region: str, kind: str, fn: Callable[[], Any]) -> Any:
        try:
            result = fn()
        except Exception as err:
            self.ledger.note(region, kind, False, f"{type(err).__name__}: {err}")
            raise
        self.ledger.note(region, kind, True)
        return result

    # -- operations ---------------------------------------------------------------
    def boot(self) -> None:
        if len(self.ledger.servers) >= self.max_servers:
            return
        region = self.random.choice(self.regions)
        conn = self.connect(region)
        if self._image is None:
            self._image = conn.image.find_image("tiny", ignore_missing=False)
            self._flavor = conn.compute.find_flavor("m1.tiny", ignore_missing=False)
        server = self._call(region, "boot", lambda: conn.compute.create_server(
            name=self.network.name, image_id=self._image.id, flavor_id=self._flavor.id,
            networks=[{"uuid": self.network.id}]))
        with self.ledger.lock:
            self.ledger.servers[server.id] = region

    def delete_server(self) -> None:
        with self.ledger.lock:
            choices = sorted(self.ledger.servers.items())
        if not choices:
            return
        server_id, region = self.random.choice(choices)
        conn = self.connect(region)
        with self.ledger.lock:
            self.ledger.servers.pop(server_id, None)
            self.ledger.doubtful.add(server_id)
        self._call(region, "delete_server", lambda: conn.compute.delete_server(server_id))
        with self.ledger.lock:
            self.ledger.doubtful.discard(server_id)
            self.ledger.deleted_servers[server_id] = region

    def create_port(self) -> None:
        if len(self.ledger.ports) >= self.max_ports:
            return
        conn = self.connect(CENTRAL)
        port = self._call(CENTRAL, "create_port", lambda: conn.network.create_port(
            network_id=self.network.id, name=self.network.name, security_group_ids=[self.group.id]))
        with self.ledger.lock:
            self.ledger.ports.add(port.id)

    def _pick_port(self) -> str | None:
        """One of the user's live ports, seeded (None: there is none)."""
        with self.ledger.lock:
            choices = sorted(self.ledger.ports)
        return self.random.choice(choices) if choices else None

    def update_port(self) -> None:
        port_id = self._pick_port()
        if port_id is None:
            return
        conn = self.connect(CENTRAL)
        self._call(CENTRAL, "update_port", lambda: conn.network.update_port(
            port_id, description=f"load {self.random.randrange(10**6)}"))

    def delete_port(self) -> None:
        port_id = self._pick_port()
        if port_id is None:
            return
        conn = self.connect(CENTRAL)
        with self.ledger.lock:
            self.ledger.ports.discard(port_id)
            self.ledger.doubtful.add(port_id)
        try:
            self._call(CENTRAL, "delete_port", lambda: conn.network.delete_port(port_id))
        except Exception:
            if self._exists(conn, port_id):  # refused (e.g. its delete could not be recorded): still the user's
                with self.ledger.lock:
                    self.ledger.doubtful.discard(port_id)
                    self.ledger.ports.add(port_id)
            raise
        with self.ledger.lock:
            self.ledger.doubtful.discard(port_id)
            self.ledger.deleted_ports.add(port_id)

    @staticmethod
    def _exists(conn: Any, port_id: str) -> bool:
        try:
            return conn.network.get_port(port_id) is not None
        except Exception:  # noqa: BLE001 - not found, or could not tell: stays doubtful
            return False

    def toggle_rule(self) -> None:
        conn = self.connect(CENTRAL)
        port = 20000 + self.random.randrange(100)
        rules = [r for r in conn.network.security_group_rules(security_group_id=self.group.id)
                 if r.port_range_min == port]
        if rules:
            self._call(CENTRAL, "delete_rule", lambda: conn.network.delete_security_group_rule(rules[0]))
        else:
            self._call(CENTRAL, "create_rule", lambda: conn.network.create_security_group_rule(
                security_group_id=self.group.id, direction="ingress", protocol="tcp", ethertype="IPv4",
                port_range_min=port, port_range_max=port))
