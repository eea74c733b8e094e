"""In-memory RegionClient / RegionClients for unit tests of pure logic."""

from __future__ import annotations

from dataclasses import dataclass, field

from isthmus.ccm.errors import RegionError
from isthmus.ccm.openstack.model import Flavor, Network, Port, Server


@dataclass
class FakeRegion:
    region: str
    servers: list[Server] = field(default_factory=list)
    flavors: dict[str, Flavor] = field(default_factory=dict)
    ports: list[Port] = field(default_factory=list)
    device_ports: dict[str, list[str]] = field(default_factory=dict)  # server id -> port ids
    networks: dict[str, Network] = field(default_factory=dict)
    down: bool = False  # every call raises RegionError, as a 503 or refused connection would
    calls: list[tuple[str, str]] = field(default_factory=list)

    def _call(self, op: str, arg: str) -> None:
        self.calls.append((op, arg))
        if self.down:
            raise RegionError(self.region, f"{op} {arg}: 503 Service Unavailable")

    def get_server(self, server_id: str) -> Server | None:
        self._call("get_server", server_id)
        return next((s for s in self.servers if s.id == server_id), None)

    def find_servers(self, name: str) -> list[Server]:
        self._call("find_servers", name)
        return [s for s in self.servers if s.name == name]

    def get_flavor(self, flavor_id: str) -> Flavor | None:
        self._call("get_flavor", flavor_id)
        return self.flavors.get(flavor_id)

    def find_flavor(self, name: str) -> Flavor | None:
        self._call("find_flavor", name)
        return next((f for f in self.flavors.values() if f.name == name), None)

    def list_ports(self, device_id: str) -> list[Port]:
        self._call("list_ports", device_id)
        ids = self.device_ports.get(device_id, [])
        return [p for p in self.ports if p.id in ids]

    def get_port(self, port_id: str) -> Port | None:
        self._call("get_port", port_id)
        return next((p for p in self.ports if p.id == port_id), None)

    def get_network(self, network_id: str) -> Network | None:
        self._call("get_network", network_id)
        return self.networks.get(network_id)


@dataclass
class FakeClients:
    regions: dict[str, FakeRegion]
    missing: set[str] = field(default_factory=set)  # regions absent from the catalog

    def client(self, region: str) -> FakeRegion:
        if region in self.missing or region not in self.regions:
            raise RegionError(region, "no compute endpoint in the service catalog")
        return self.regions[region]

    def calls(self) -> list[tuple[str, str, str]]:
        return [(r, op, arg) for r, fake in self.regions.items() for op, arg in fake.calls]
