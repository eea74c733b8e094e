"""Networking core: central changes reach every copy; nothing is
wiped on a read that failed or a 404 central never recorded as its own delete."""

from __future__ import annotations

import uuid

import pytest

from isthmus.network import SHADOW_OWNER
from tests.integration.helpers import (
    CENTRAL,
    boot,
    bound_in,
    delete_security_group,
    enqueue_job,
    eventually,
    network_or_none,
    port_or_none,
    run_again,
    sandbox_cli,
    sandbox_layout,
)

pytestmark = pytest.mark.integration




def test_every_user_settable_port_attribute_reaches_the_regional_copy(sandbox, central, admin, stretched):
    net, subnet = stretched
    one = sandbox.regions[0]
    conn = sandbox.connect(one)
    server = conn.compute.wait_for_server(boot(conn, net.name, net.id), wait=240)
    (port,) = list(admin[one].network.ports(device_id=server.id))
    sg2 = central.network.create_security_group(name=f"{net.name}-sg2")
    central.network.create_security_group_rule(security_group_id=sg2.id, direction="ingress", protocol="tcp",
                                               port_range_min=22, port_range_max=22)
    try:
        central.network.update_port(port.id, name="renamed", description="set at central", admin_state_up=False,
                                    security_group_ids=[sg2.id],
                                    allowed_address_pairs=[{"ip_address": "10.77.0.200"}],
                                    extra_dhcp_opts=[{"opt_name": "domain-search", "opt_value": "example.org"}])

        def copy_matches():
            copy = admin[one].network.get_port(port.id)
            return (copy.name == "renamed" and copy.description == "set at central" and not copy.is_admin_state_up
                    and copy.security_group_ids == [sg2.id]
                    and [p["ip_address"] for p in copy.allowed_address_pairs] == ["10.77.0.200"]
                    and [(o["opt_name"], o["opt_value"]) for o in copy.extra_dhcp_opts]
                    == [("domain-search", "example.org")])

        eventually(copy_matches, timeout=60, what="central's port update in the regional copy")
        # The newly referenced group was copied, with its rules, to the enforcing region.
        group = admin[one].network.get_security_group(sg2.id)
        assert any(r["port_range_min"] == 22 for r in group.security_group_rules)

        central.network.update_port(port.id, security_group_ids=[], port_security_enabled=False,
                                    allowed_address_pairs=[], extra_dhcp_opts=[
                                        {"opt_name": "domain-search", "opt_value": None}])
        eventually(lambda: (lambda c: c.is_port_security_enabled is False and c.security_group_ids == []
                            and not c.allowed_address_pairs and not c.extra_dhcp_opts)(
            admin[one].network.get_port(port.id)), timeout=60, what="port security off in the copy")

        central.network.update_port(port.id, fixed_ips=[{"subnet_id": subnet.id, "ip_address": "10.77.0.50"}])
        eventually(lambda: [ip["ip_address"] for ip in admin[one].network.get_port(port.id).fixed_ips]
                   == ["10.77.0.50"], timeout=60, what="new fixed IP in the copy")
    finally:
        conn.compute.delete_server(server)
        conn.compute.wait_for_delete(server, wait=120)
        eventually(lambda: delete_security_group(central, sg2.id), timeout=60, what="delete of sg2")


def test_a_central_404_that_central_never_recorded_wipes_nothing(sandbox, admin):
    """Before: a network_sync whose central read answered 404 deleted every
    regional copy of the network, ports included. A network central never had
    (made in one region only) is the plainest such 404."""
    one = sandbox.regions[0]
    local = admin[one].network.create_network(name=f"regional-{uuid.uuid4().hex[:6]}")
    try:
        admin[one].network.create_subnet(network_id=local.id, ip_version=4, cidr="10.78.0.0/24")
        port = admin[one].network.create_port(network_id=local.id, name="must-survive")
        job = eventually(run_again(sandbox, "network_sync", local.id), timeout=60, what="the sync job")
        assert job.status == "FAIL" and "recorded no delete" in job.last_error
        assert network_or_none(admin[one], local.id) is not None
        assert port_or_none(admin[one], port.id) is not None
    finally:
        for p in admin[one].network.ports(network_id=local.id):
            admin[one].network.delete_port(p)
        admin[one].network.delete_network(local.id)


def test_a_group_shared_from_another_project_is_not_taken_for_deleted(sandbox, central, admin, stretched):
    net, _ = stretched
    one = sandbox.regions[0]
    shared = admin[CENTRAL].network.create_security_group(name=f"{net.name}-shared")
    try:
        admin[CENTRAL].network.create_rbac_policy(object_type="security_group", object_id=shared.id,
                                                  action="access_as_shared",
                                                  target_project_id=central.current_project_id)
        port = central.network.create_port(network_id=net.id, name=f"{net.name}-p", security_group_ids=[shared.id])
        conn = sandbox.connect(one)
        server = conn.compute.wait_for_server(boot(conn, net.name, port_id=port.id), wait=240)
        assert admin[one].network.get_security_group(shared.id) is not None
        project = central.current_project_id
        job = eventually(run_again(sandbox, "security_group_sync", project), timeout=90, what="group sync")
        assert job.status == "SUCCESS", job.last_error
        assert admin[one].network.get_security_group(shared.id).id == shared.id
        conn.compute.delete_server(server)
        conn.compute.wait_for_delete(server, wait=120)
    finally:
        for p in central.network.ports(network_id=net.id, name=f"{net.name}-p"):
            central.network.delete_port(p)
        eventually(lambda: delete_security_group(admin[CENTRAL], shared.id), timeout=60,
                   what="delete of the shared group")


@pytest.mark.exclusive
def test_central_down_mid_boot_then_back_bindings_and_shadows_converge(sandbox, central, admin, stretched):
    """What is copied keeps working while central is down: a boot on a copied
    port, lookups by name, and the delete of a server; central learns all of it
    once it is back (reports are retried), and the other region's shadows follow."""
    net, _ = stretched
    one, two = sandbox.regions
    conn_one, conn_two = sandbox.connect(one), sandbox.connect(two)
    anchor = conn_two.compute.wait_for_server(boot(conn_two, net.name, net.id), wait=240)  # a member in two
    port = central.network.create_port(network_id=net.id, name=f"{net.name}-pre")
    assert conn_one.network.get_port(port.id).id == port.id  # copied into one while central is up
    doomed = conn_one.compute.wait_for_server(boot(conn_one, net.name, net.id), wait=240)
    (doomed_port,) = list(admin[one].network.ports(device_id=doomed.id))
    eventually(lambda: port_or_none(admin[two], doomed_port.id), what=f"shadow of the doomed port in {two}")
    sandbox_cli(sandbox, "sandbox", "stop", f"neutron-{CENTRAL}")
    try:
        server = conn_one.compute.wait_for_server(boot(conn_one, net.name, port_id=port.id), wait=240)
        assert server.status == "ACTIVE"
        assert [n.id for n in conn_one.network.networks(name=net.name)] == [net.id]  # by name, from the copy
        conn_one.compute.delete_server(doomed)
        conn_one.compute.wait_for_delete(doomed, wait=120)
    finally:
        sandbox_cli(sandbox, "sandbox", "restart", f"neutron-{CENTRAL}")
    eventually(lambda: bound_in(admin, port.id, one), timeout=120, what="the binding reported after central returned")
    shadow = eventually(lambda: port_or_none(admin[two], port.id), timeout=120, what=f"shadow in {two}")
    assert shadow.device_owner == SHADOW_OWNER and shadow.mac_address == port.mac_address
    # The server deleted while central was down: its port goes at central, and its shadow with it.
    eventually(lambda: port_or_none(admin[CENTRAL], doomed_port.id) is None, timeout=120,
               what="the port deleted during the outage gone at central")
    eventually(lambda: port_or_none(admin[two], doomed_port.id) is None, timeout=120,
               what=f"its shadow gone from {two}")
    assert anchor.id


@pytest.mark.exclusive
def test_binding_sync_repairs_what_a_restarted_region_forgot_to_report(sandbox, central, admin, stretched):
    """A report still queued when the region's neutron-server restarted is lost;
    the worker's binding_sync repairs central from the region's own state."""
    net, _ = stretched
    one = sandbox.regions[0]
    conn = sandbox.connect(one)
    port = central.network.create_port(network_id=net.id, name=f"{net.name}-pre")
    assert conn.network.get_port(port.id).id == port.id
    sandbox_cli(sandbox, "sandbox", "stop", f"neutron-{CENTRAL}")
    try:
        server = conn.compute.wait_for_server(boot(conn, net.name, port_id=port.id), wait=240)
        assert server.status == "ACTIVE"
        sandbox_cli(sandbox, "sandbox", "restart", f"neutron-{one}")  # its queued report is gone with it
    finally:
        sandbox_cli(sandbox, "sandbox", "restart", f"neutron-{CENTRAL}")
    enqueue_job(sandbox, "binding_sync", one)  # also periodic; enqueued here so the test need not wait
    eventually(lambda: bound_in(admin, port.id, one), timeout=120, what="central's binding record repaired")


def test_dhcp_turned_on_later_takes_centrals_reserved_address_in_each_region(sandbox, central, admin):
    from isthmus.network import dhcp_reservation_name

    one = sandbox.regions[0]
    net = central.network.create_network(name=f"dhcp-{uuid.uuid4().hex[:6]}")
    try:
        subnet = central.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.79.0.0/24",
                                               is_dhcp_enabled=False)
        assert admin[one].network.get_network(net.id).id == net.id  # copied, without DHCP
        central.network.update_subnet(subnet.id, is_dhcp_enabled=True)
        (reserved,) = list(admin[CENTRAL].network.ports(network_id=net.id, name=dhcp_reservation_name(subnet.id)))
        eventually(lambda: admin[one].network.get_subnet(subnet.id).is_dhcp_enabled, timeout=60,
                   what="DHCP on in the copy")
        dhcp = [p for p in admin[one].network.ports(network_id=net.id) if p.device_owner == "network:dhcp"]
        assert [(p.id, p.fixed_ips[0]["ip_address"]) for p in dhcp] == [
            (reserved.id, reserved.fixed_ips[0]["ip_address"])]
    finally:
        eventually(lambda: _delete_net(central, net.id), timeout=60, what="network delete")


def _delete_net(conn, network_id) -> bool:
    from tests.integration.helpers import delete_network

    return delete_network(conn, network_id)


def test_an_external_network_is_copied_as_external_with_the_upstream_gateway(sandbox, admin):
    one = sandbox.regions[0]
    top = admin[CENTRAL].network.create_network(name=f"ext-{uuid.uuid4().hex[:6]}", is_router_external=True)
    try:
        subnet = admin[CENTRAL].network.create_subnet(network_id=top.id, ip_version=4, cidr="203.0.113.0/24",
                                                      gateway_ip="203.0.113.1", is_dhcp_enabled=False)
        copy = admin[one].network.get_network(top.id)
        assert copy.is_router_external is True
        assert admin[one].network.get_subnet(subnet.id).gateway_ip == "203.0.113.1"
    finally:
        eventually(lambda: _delete_net(admin[CENTRAL], top.id), timeout=60, what="network delete")


def _service_pid(sandbox, name: str) -> int:
    from isthmus.sandbox.process import ServiceRecord

    (record,) = [r for r in ServiceRecord.load_all(sandbox.state_dir / "run") if r.name == name]
    return record.pid


@pytest.mark.exclusive
def test_a_hung_region_blocks_no_other_and_its_jobs_resume(sandbox, central, admin, stretched):
    """neutron-server of RegionTwo stopped with SIGSTOP: it accepts connections
    and never answers. Calls to it time out, its breaker fails the rest fast,
    and RegionOne's wiring goes on; once it answers again, its jobs complete."""
    import os
    import signal

    net, _ = stretched
    one, two = sandbox.regions
    conn_one, conn_two = sandbox.connect(one), sandbox.connect(two)
    vm_one = conn_one.compute.wait_for_server(boot(conn_one, net.name, net.id), wait=240)
    conn_two.compute.wait_for_server(boot(conn_two, net.name, net.id), wait=240)
    (port_one,) = list(admin[one].network.ports(device_id=vm_one.id))
    pgid = _service_pid(sandbox, f"neutron-{two}")
    os.killpg(pgid, signal.SIGSTOP)
    try:
        central.network.update_network(net, description="while RegionTwo hangs")
        for n in range(6):  # more changes than the worker has slots
            central.network.update_port(port_one.id, description=f"change {n}")
        # Bounded by one timed-out call to the hung region (the client's timeout and
        # its one retry, 2 x 30 s) before its breaker opens; never by the hang itself.
        eventually(lambda: admin[one].network.get_port(port_one.id).description == "change 5", timeout=150,
                   what=f"the port change in {one} while {two} hangs")
        eventually(lambda: admin[one].network.get_network(net.id).description == "while RegionTwo hangs",
                   timeout=150, what=f"the network change in {one} while {two} hangs")
    finally:
        os.killpg(pgid, signal.SIGCONT)
    admin[two] = sandbox.connect(two, cloud="isthmus-admin")
    eventually(lambda: admin[two].network.get_network(net.id).description == "while RegionTwo hangs",
               timeout=180, what=f"the network change in {two} after it answered again")


def test_lists_page_to_the_end_under_a_small_page_limit(sandbox, central, admin, stretched):
    """More VM ports than one page of every Neutron: every one of them gets its
    shadow, and a full resync keeps them all."""
    from isthmus.sandbox.nova import compute_host

    limit = sandbox_layout(sandbox.state_dir).neutron_page_limit
    if not limit:
        pytest.skip("this sandbox runs Neutron without pagination_max_limit (the test sandbox sets it)")
    net, _ = stretched
    one, two = sandbox.regions
    conn_two = sandbox.connect(two)
    conn_two.compute.wait_for_server(boot(conn_two, net.name, net.id), wait=240)  # a member in two
    count = limit + 5
    ports = []
    # One after another: the sandbox's regional Neutron keeps its database in SQLite,
    # and four writers at once beside the other tests' boots timed out on its lock.
    for n in range(count):  # as nova-compute makes them: create, then bind
        port = admin[one].network.create_port(network_id=net.id, name=f"{net.name}-vm{n}",
                                              device_owner="compute:nova", device_id=str(uuid.uuid4()))
        ports.append(admin[one].network.update_port(port, binding_host_id=compute_host(one)))
    ids = {p.id for p in ports}

    def shadows_in_two():
        return {p.id for p in admin[two].network.ports(network_id=net.id, device_owner=SHADOW_OWNER)} & ids

    eventually(lambda: shadows_in_two() == ids, timeout=180, what=f"{count} shadows in {two}")
    job = eventually(run_again(sandbox, "network_sync", net.id), timeout=120, what="the full resync")
    assert job.status == "SUCCESS", job.last_error
    assert shadows_in_two() == ids
    assert {p.id for p in admin[one].network.ports(network_id=net.id)} >= ids
    for port in ports:
        admin[one].network.delete_port(port)


def test_a_list_of_shadows_by_id_reads_nothing_from_central(sandbox, admin):
    """A region asked for shadows by id (a watcher polling for them) answers from
    what it has; a central port it lacks is read from central and copied only when
    a copy could be in the answer (before: one central read per missing id, on
    every poll)."""
    one = sandbox.regions[0]
    net = admin[CENTRAL].network.create_network(name=f"unplaced-{uuid.uuid4().hex[:6]}")
    admin[CENTRAL].network.create_subnet(network_id=net.id, ip_version=4, cidr="10.79.0.0/24")
    port = admin[CENTRAL].network.create_port(network_id=net.id, name=f"{net.name}-port")
    log = sandbox.state_dir / "logs" / f"neutron-{CENTRAL}.log"
    asked = f"GET /v2.0/ports/{port.id} "

    def central_reads_since(offset: int) -> int:
        with log.open(errors="replace") as lines:
            lines.seek(offset)
            return lines.read().count(asked)

    try:
        start = log.stat().st_size
        assert list(admin[one].network.ports(id=port.id, device_owner=SHADOW_OWNER)) == []
        assert list(admin[one].network.ports(name=port.name)) == []  # nothing copied (a list by name copies none)
        # The control: asked for the port itself, the region copies it from central,
        # with one read. Central logs a request after answering it, so the count is
        # taken once the control's line is there: a read the first list made would
        # be logged before it.
        assert [p.id for p in admin[one].network.ports(id=port.id)] == [port.id]
        eventually(lambda: central_reads_since(start) > 0, timeout=10, what="central's access log line")
        assert central_reads_since(start) == 1
    finally:
        admin[CENTRAL].network.delete_port(port.id)
        eventually(lambda: _delete_net(admin[CENTRAL], net.id), timeout=60, what="network delete")


def test_a_segment_taken_by_a_region_only_network_is_a_precise_409(sandbox, admin):
    """Regions allocate their own networks' VNIs from ranges central does not use
    (the sandbox's are disjoint); a central network an admin put on a VNI a region
    already uses cannot be copied there, and the answer says why and what to fix."""
    import openstack.exceptions as os_exc

    one = sandbox.regions[0]
    local = admin[one].network.create_network(name=f"own-{uuid.uuid4().hex[:6]}")
    top = None
    try:
        vni = local.provider_segmentation_id
        assert not 1 <= vni <= 99999  # outside central's range in the sandbox
        top = admin[CENTRAL].network.create_network(name=f"clash-{uuid.uuid4().hex[:6]}",
                                                    provider_network_type="vxlan", provider_segmentation_id=vni)
        with pytest.raises(os_exc.ConflictException, match=f"segment vxlan:{vni} is taken there"):
            admin[one].network.get_network(top.id)
    finally:
        admin[one].network.delete_network(local.id)
        if top is not None:
            admin[CENTRAL].network.delete_network(top.id)
