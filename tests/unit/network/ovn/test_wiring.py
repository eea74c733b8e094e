"""Where the OVN wiring places each port (isthmus/network/reconcilers/ovn/wiring.py)."""

from isthmus.network import PROFILE_KEY, TRANSIT_OWNER
from isthmus.network.reconcilers.ovn.plan import RemoteChassis
from isthmus.network.reconcilers.ovn.wiring import home_of, wanted_for


def port(port_id, region=None, host="", owner="compute:az1", name=""):
    profile = {PROFILE_KEY: {"region": region}} if region else {}
    return {"id": port_id, "name": name, "network_id": "net", "mac_address": f"fa:16:3e:00:00:0{port_id[-1]}",
            "fixed_ips": [{"ip_address": f"10.0.0.{port_id[-1]}"}], "device_owner": owner,
            "binding:host_id": host, "binding:profile": profile}


class Keys:
    def network_key(self, network_id):
        return 16711681

    def port_key(self, network_id, port_id):
        return int(port_id[-1])


class Hypervisors:
    def __init__(self):
        self.asked = []

    def of(self, region, host):
        self.asked.append((region, host))
        return RemoteChassis(f"{region}-{host or 'gateway'}", host or "gw", "geneve", "192.0.2.9", region)


def test_a_bound_port_lives_on_its_host_and_a_transit_port_in_its_halfs_region():
    assert home_of(port("p1", "RegionOne", "h1")) == ("RegionOne", "h1")
    assert home_of(port("p2")) is None
    transit = port("t3", owner=TRANSIT_OWNER, name="isthmus-transit-RegionTwo")
    assert home_of(transit) == ("RegionTwo", None)
    # The name alone does not place an ordinary port.
    assert home_of(port("p4", name="isthmus-transit-RegionTwo")) is None


def test_local_ports_get_keys_remote_ones_remote_ports_and_unbound_ones_are_removable():
    hypervisors = Hypervisors()
    ports = [port("p1", "RegionOne", "h1"), port("p2", "RegionTwo", "h2"), port("p3"),
             port("t4", owner=TRANSIT_OWNER, name="isthmus-transit-RegionTwo"),
             port("d5", "RegionTwo", "h2", owner="network:dhcp")]
    wanted = wanted_for("RegionOne", "net", ports, Keys(), hypervisors)
    assert dict(wanted.local_keys) == {"p1": 1}
    assert {p: (r.region, r.chassis, r.tunnel_key, r.addresses) for p, r in wanted.remote_ports.items()} == {
        "p2": ("RegionTwo", "RegionTwo-h2", 2, "fa:16:3e:00:00:02 10.0.0.2"),
        "t4": ("RegionTwo", "RegionTwo-gateway", 4, "fa:16:3e:00:00:04 10.0.0.4")}
    # Bound here (a remote port of it would be a second copy) or bound nowhere.
    assert wanted.removable == frozenset({"p1", "p3"})
    assert ("RegionTwo", None) in hypervisors.asked
