"""Pure port planning of the network_sync reconciler."""

from isthmus.network import PROFILE_KEY
from isthmus.network.reconcilers import plans


def _port(port_id, owner="", host="", region=None):
    profile = {PROFILE_KEY: {"region": region}} if region else {}
    return {"id": port_id, "network_id": "n", "project_id": "p", "mac_address": "fa:16:3e:00:00:01",
            "fixed_ips": [{"subnet_id": "s", "ip_address": "10.0.0.5"}], "device_owner": owner,
            "device_id": "", "binding:host_id": host, "binding:profile": profile}


def test_an_unbound_copy_of_a_port_deleted_at_central_is_deleted():
    # Nova leaves a pre-created port unbound (device_owner "") when its server goes;
    # once central deletes the port, the copy must go (it holds security groups).
    plan = plans.plan_ports("RegionOne", [], [_port("a"), _port("b", owner="compute:az1", host="h")])
    assert sorted(plan.delete) == ["a", "b"]


def test_network_owned_ports_and_live_copies_stay():
    central = [_port("a")]
    regional = [_port("a"), _port("d", owner="network:dhcp"), _port("g", owner="network:distributed")]
    assert plans.plan_ports("RegionOne", central, regional).delete == []


def test_an_unbound_copy_of_a_port_bound_elsewhere_is_deleted():
    central = [_port("a", owner="compute:az2", host="regiontwo-compute", region="RegionTwo")]
    assert plans.plan_ports("RegionOne", central, [_port("a")]).delete == ["a"]
