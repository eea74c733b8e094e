"""network_sync's order of reads (pure logic over in-memory stand-ins of the REST
clients): every region's ports before central's, central's once per pass, and a
region that cannot be read delays only itself."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import cast

import pytest

from isthmus.clients import Unavailable
from isthmus.jobs import JobContext, RetryLater
from isthmus.network.reconcilers.network_sync import NetworkSync
from isthmus.network.reconcilers.ovn.access import OvnAccess
from isthmus.network.reconcilers.port_sync import PortWriter
from isthmus.network.reconcilers.regions import Regions
from isthmus.network.reconcilers.shadows import ShadowPolicy
from isthmus.network.reconcilers.topology import Topology
from isthmus.registry import Registry, Tombstones

NETWORK = {"id": "n", "name": "net", "provider:network_type": "vxlan", "admin_state_up": True}
PORT = {"id": "p", "network_id": "n", "mac_address": "fa:16:3e:00:00:01", "device_owner": "compute:az1",
        "binding:host_id": "h", "binding:profile": {}, "fixed_ips": [], "revision_number": 1}

calls: list[tuple[str, str, str]] = []
lock = threading.Lock()


@dataclass
class Neutron:
    name: str
    ports: list[dict] = field(default_factory=lambda: [dict(PORT)])
    down: bool = False

    def _call(self, method: str, collection: str) -> None:
        with lock:
            calls.append((self.name, method, collection))
        if self.down:
            raise Unavailable(f"{self.name} down")

    def get(self, collection, obj_id):
        self._call("get", collection)
        return dict(NETWORK) if collection == "networks" else None

    def list(self, collection, **filters):
        self._call("list", collection)
        return [dict(p) for p in self.ports] if collection == "ports" else []


class FakeRegions:
    def __init__(self, central: Neutron, regions: dict[str, Neutron]) -> None:
        self.central = central
        self._regions = regions

    def neutron(self, region):
        return self._regions[region]


class FakeTopology:
    def __init__(self, regions: list[str]) -> None:
        self._regions = regions

    def regions(self):
        return list(self._regions)

    def routed_regions(self, network_id):
        return set(self._regions)


class NoTombstones:
    def buried(self, resource_type, ids):
        return set()

    def is_buried(self, resource_type, resource_id):
        return False


def network_sync(regions: dict[str, Neutron]) -> tuple[NetworkSync, Neutron]:
    central = Neutron("central")
    fake = cast(Regions, FakeRegions(central, regions))
    handler = NetworkSync(fake, cast(Registry, None), cast(Topology, FakeTopology(list(regions))),
                          cast(Tombstones, NoTombstones()), ShadowPolicy("none", fake), OvnAccess(),
                          PortWriter(fake, cast(Registry, None)))
    return handler, central


def run(handler: NetworkSync) -> None:
    calls.clear()
    handler.run(JobContext("j", "network_sync", "n", None, {}, 1))


def test_every_region_is_read_before_central_which_is_listed_once():
    names = ["RegionOne", "RegionTwo", "RegionThree"]
    handler, _ = network_sync({name: Neutron(name) for name in names})
    run(handler)
    port_lists = [who for who, method, collection in calls if (method, collection) == ("list", "ports")]
    assert port_lists.count("central") == 1
    assert port_lists[-1] == "central" and sorted(port_lists[:-1]) == sorted(names)


def test_a_region_that_cannot_be_read_delays_only_itself():
    one, two = Neutron("RegionOne"), Neutron("RegionTwo", down=True)
    handler, _ = network_sync({"RegionOne": one, "RegionTwo": two})
    with pytest.raises(RetryLater, match="RegionTwo"):
        run(handler)
    # RegionOne was planned all the same: its stray subnets were looked for after central's list.
    assert ("RegionOne", "list", "subnets") in calls and ("central", "list", "ports") in calls
