"""The sandbox's tour, run once per test sandbox and shared by the tests that need it.

``isthmus sandbox tour --keep`` boots one server per region on ``tour-net``
(about a minute). The first test that asks runs it, under a lock in the state
directory that every pytest process of the run shares (both workers of the
parallel phase and the exclusive phase), and records its output and objects
there; later ones read the record. Its objects stay until the sandbox goes down:
the tour's names are fixed, so a second tour would replace them under a test.
"""

from __future__ import annotations

import fcntl
import json
from dataclasses import dataclass

from tests.integration.helpers import CENTRAL
from tests.sandboxes import Sandbox, isthmus

NETWORK = "tour-net"
RECORD = "tests-tour.json"


@dataclass(frozen=True)
class Tour:
    output: str  # what the tour printed
    network: str  # tour-net's id
    servers: dict[str, str]  # region -> the tour server's id


def _still_there(sandbox: Sandbox, tour: Tour) -> bool:
    for region, server_id in tour.servers.items():
        server = sandbox.connect(region).compute.find_server(server_id, ignore_missing=True)
        if server is None or server.status != "ACTIVE":
            return False
    return True


def _run(sandbox: Sandbox) -> Tour:
    result = isthmus("sandbox", "tour", "--keep", "--state-dir", str(sandbox.state_dir), timeout=900)
    net = sandbox.connect(CENTRAL).network.find_network(NETWORK, ignore_missing=False)
    servers = {}
    for region in sandbox.regions:
        name = f"tour-{region.lower()}"
        (server,) = [s for s in sandbox.connect(region).compute.servers(name=name) if s.name == name]
        servers[region] = server.id
    return Tour(result.stdout, net.id, servers)


def shared_tour(sandbox: Sandbox) -> Tour:
    """The run's tour: its record when its servers are still up, else a new tour."""
    with open(sandbox.state_dir / "tests-tour.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = sandbox.state_dir / RECORD
        if record.exists():
            tour = Tour(**json.loads(record.read_text()))
            if _still_there(sandbox, tour):
                return tour
        tour = _run(sandbox)
        record.write_text(json.dumps(tour.__dict__))
        return tour
