"""Convergence of one region's Octavia (fake), and the floating IP decisions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from isthmus.ccm.errors import RegionError
from isthmus.ccm.openstack.loadbalancer import model as m
from isthmus.ccm.openstack.loadbalancer.octavia import (
    FipAction,
    FloatingIP,
    LBError,
    Pending,
    RegionReconciler,
    decide_fip,
    decide_fip_on_delete,
    fip_description,
)
from isthmus.ccm.openstack.loadbalancer.options import LoadBalancerConfig
from isthmus.ccm.openstack.loadbalancer.plan import DesiredLB, plan_service

from .lbfakes import FakeOctavia

UID = "uid-1"
CONFIG = LoadBalancerConfig(default={"subnet_id": "sub-1", "create_monitor": True})


def desired(ports: tuple[m.ServicePort, ...] = (m.ServicePort("http", "TCP", 80, 30080),),
            nodes: tuple[tuple[str, str], ...] = (("n1", "10.0.0.1"), ("n2", "10.0.0.2")),
            annotations: dict[str, str] | None = None, config: LoadBalancerConfig = CONFIG) -> DesiredLB:
    service = m.ServiceView("ns", "web", UID, "LoadBalancer", ports, annotations or {})
    lb_nodes = [m.LBNode(name, "RegionOne", addr, True, False, False) for name, addr in nodes]
    return plan_service(service, lb_nodes, config, ("RegionOne",), "c").load_balancers["RegionOne"]


def no_sleep(_: float) -> None:
    pass


def reconciler(fake: FakeOctavia, timeout: float = 5.0) -> RegionReconciler:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    return RegionReconciler(fake, timeout=timeout, interval=1.0, sleep=sleep, clock=lambda: now[0])


def test_create_then_idempotent() -> None:
    fake = FakeOctavia("RegionOne")
    result = reconciler(fake).ensure(desired(), UID, "ns/web")
    assert fake.tree() == {"kube_service_c_ns_web": {("TCP", 80): {
        "protocol": "TCP", "method": "ROUND_ROBIN", "members": [("10.0.0.1", 30080), ("10.0.0.2", 30080)],
        "monitor": "TCP"}}}
    assert result.address == "10.9.0.1" and result.floating_ip == ""
    assert fake.subnets == {"10.0.0.1": "sub-1", "10.0.0.2": "sub-1"}
    writes = len(fake.writes)
    again = reconciler(fake).ensure(desired(), UID, "ns/web")
    assert len(fake.writes) == writes and again.changes == []  # nothing to do, nothing done


def test_incremental_changes() -> None:
    fake = FakeOctavia("RegionOne")
    reconciler(fake).ensure(desired(), UID, "ns/web")
    fake.writes.clear()
    ports = (m.ServicePort("http", "TCP", 80, 30080), m.ServicePort("dns", "UDP", 53, 30053))
    changed = desired(ports, nodes=(("n2", "10.0.0.2"), ("n3", "10.0.0.3")),
                      annotations={m.ANN_LB_METHOD: "LEAST_CONNECTIONS", m.ANN_MONITOR_DELAY: "9"})
    reconciler(fake).ensure(changed, UID, "ns/web")
    tree = fake.tree()["kube_service_c_ns_web"]
    assert tree[("TCP", 80)] == {"protocol": "TCP", "method": "LEAST_CONNECTIONS",
                                 "members": [("10.0.0.2", 30080), ("10.0.0.3", 30080)], "monitor": "TCP"}
    assert tree[("UDP", 53)]["monitor"] == "UDP-CONNECT"
    assert not any(w.startswith(("create lb", "delete lb", "create listener TCP")) for w in fake.writes)
    assert "replace members 10.0.0.2:30080 10.0.0.3:30080" in fake.writes and "update monitor" in fake.writes
    assert sum(w.startswith("replace members") for w in fake.writes) == 2  # one batch per pool
    # proxy-protocol on: the TCP pool is replaced (a pool's protocol cannot change); a port removed
    fake.writes.clear()
    proxy = desired(annotations={m.ANN_PROXY_PROTOCOL: "true", m.ANN_ENABLE_MONITOR: "false"})
    reconciler(fake).ensure(proxy, UID, "ns/web")
    assert fake.tree()["kube_service_c_ns_web"] == {("TCP", 80): {
        "protocol": "PROXY", "method": "ROUND_ROBIN", "members": [("10.0.0.1", 30080), ("10.0.0.2", 30080)],
        "monitor": None}}


def test_someone_elses_load_balancer_with_our_name_is_left_alone() -> None:
    fake = FakeOctavia("RegionOne")
    lb = fake.create_load_balancer(replace(desired(), description="made by hand"))
    fake.writes.clear()
    with pytest.raises(LBError, match="did not create"):
        reconciler(fake).ensure(desired(), UID, "ns/web")
    assert reconciler(fake).delete("kube_service_c_ns_web", UID, False) == []
    assert fake.writes == [] and lb.id in fake.lbs
    # another Service's UID is not ours either (a Service deleted and recreated under the same name)
    other = FakeOctavia("RegionOne")
    old = replace(desired(), description="isthmus-ccm uid=uid-old service=ns/web cluster=c")
    reconciler(other).ensure(old, "uid-old", "ns/web")
    with pytest.raises(LBError):
        reconciler(other).ensure(desired(), UID, "ns/web")


def test_pending_waits_then_gives_up_boundedly() -> None:
    fake = FakeOctavia("RegionOne")
    reconciler(fake).ensure(desired(), UID, "ns/web")
    fake.pending_reads = 3
    reconciler(fake, timeout=5).ensure(desired(nodes=(("n1", "10.0.0.1"),)), UID, "ns/web")  # waits 3 polls
    fake.pending_reads = 100
    with pytest.raises(Pending, match="still PENDING_UPDATE after 5s"):
        reconciler(fake, timeout=5).ensure(desired(), UID, "ns/web")


def test_error_state_is_reported() -> None:
    fake = FakeOctavia("RegionOne")
    reconciler(fake).ensure(desired(), UID, "ns/web")
    lb = next(iter(fake.lbs.values()))
    fake.lbs[lb.id] = replace(lb, provisioning_status="ERROR")
    with pytest.raises(LBError, match="in ERROR"):
        reconciler(fake).ensure(desired(), UID, "ns/web")


def test_a_failing_region_deletes_nothing() -> None:
    fake = FakeOctavia("RegionOne")
    reconciler(fake).ensure(desired(), UID, "ns/web")
    fake.writes.clear()
    fake.down = True
    with pytest.raises(RegionError):
        reconciler(fake).delete("kube_service_c_ns_web", UID, False)
    with pytest.raises(RegionError):
        reconciler(fake).ensure(desired(nodes=(("n1", "10.0.0.1"),)), UID, "ns/web")
    assert fake.writes == [] and len(fake.lbs) == 1


# --- floating IPs ---

VIP_PORT = "vip-port"
OURS = FloatingIP("f-ours", "203.0.113.1", VIP_PORT, fip_description(UID, "ns/web"))
THEIRS = FloatingIP("f-theirs", "203.0.113.2", VIP_PORT, "reserved by the user")
FREE = FloatingIP("f-free", "203.0.113.3", "", "")
BUSY = FloatingIP("f-busy", "203.0.113.4", "other-port", "")
EXT = desired(config=LoadBalancerConfig(default={"subnet_id": "s", "floating_network_id": "ext"}))
INTERNAL = replace(EXT, floating_network_id="")


@pytest.mark.parametrize(("want", "attached", "requested", "expected"), [
    (EXT, [], None, [FipAction("create")]),
    (EXT, [OURS], None, [FipAction("use", OURS)]),
    (EXT, [THEIRS], None, [FipAction("use", THEIRS)]),
    (replace(EXT, floating_ip=FREE.address), [], FREE, [FipAction("associate", FREE)]),
    (replace(EXT, floating_ip=BUSY.address), [], BUSY,
     [FipAction("none", BUSY, problem="requested floating IP 203.0.113.4 is in use by port other-port")]),
    (replace(EXT, floating_ip="203.0.113.9"), [], None,
     [FipAction("none", problem="requested floating IP 203.0.113.9 does not exist")]),
    (replace(EXT, floating_ip=FREE.address), [OURS], None,
     [FipAction("use", OURS, problem="floating IP 203.0.113.1 is on the VIP, not the requested 203.0.113.3: "
                                     "delete the Service to change it")]),
    (INTERNAL, [OURS, THEIRS], None, [FipAction("release", OURS), FipAction("none", THEIRS)]),
    (replace(INTERNAL, keep_floatingip=True), [OURS], None, [FipAction("none", OURS)]),
    (INTERNAL, [], None, []),
])
def test_fip_decisions(want: DesiredLB, attached: list[FloatingIP], requested: FloatingIP | None,
                       expected: list[FipAction]) -> None:
    assert decide_fip(want, attached, requested, VIP_PORT, UID) == expected


@pytest.mark.parametrize(("keep", "expected"), [
    (False, [FipAction("release", OURS), FipAction("detach", THEIRS)]),
    (True, [FipAction("detach", OURS), FipAction("detach", THEIRS)]),
])
def test_fip_decisions_on_delete(keep: bool, expected: list[FipAction]) -> None:
    assert decide_fip_on_delete([OURS, THEIRS], UID, keep) == expected


def test_fip_lifecycle_through_the_reconciler() -> None:
    fake = FakeOctavia("RegionOne")
    result = reconciler(fake).ensure(EXT, UID, "ns/web")
    (fip,) = fake.fips.values()
    assert result.address == fip.address and fip.description.startswith("isthmus-ccm uid=uid-1 ")
    assert reconciler(fake).ensure(EXT, UID, "ns/web").address == fip.address  # reused, not a second one
    assert len(fake.fips) == 1
    reconciler(fake).delete(EXT.name, UID, keep_floatingip=False, service_key="ns/web")
    assert fake.fips == {} and fake.lbs == {}


def test_a_service_leaving_a_region_keeps_its_address_until_it_is_deleted() -> None:
    """Issue 26 item 9: the Service's floating IP is released only when the Service is
    deleted; a region the Service left (annotation, type) keeps it detached, and the
    Service gets the same address if it comes back."""
    fake = FakeOctavia("RegionOne")
    address = reconciler(fake).ensure(EXT, UID, "ns/web").address
    reconciler(fake).delete(EXT.name, UID, keep_floatingip=False)  # the Service left this region
    assert fake.lbs == {} and [(f.address, f.port_id) for f in fake.fips.values()] == [(address, "")]
    assert reconciler(fake).ensure(EXT, UID, "ns/web").address == address  # back: the same address
    assert len(fake.fips) == 1
    reconciler(fake).delete(EXT.name, UID, keep_floatingip=False)
    reconciler(fake).delete(EXT.name, UID, keep_floatingip=False, service_key="ns/web")  # deleted: released
    assert fake.fips == {}


def test_requested_fip_is_associated_and_only_detached_on_delete() -> None:
    fake = FakeOctavia("RegionOne")
    fake.fips[FREE.id] = FREE
    result = reconciler(fake).ensure(replace(EXT, floating_ip=FREE.address), UID, "ns/web")
    assert result.address == FREE.address and fake.fips[FREE.id].port_id
    reconciler(fake).delete(EXT.name, UID, keep_floatingip=False)
    assert fake.fips[FREE.id].port_id == ""  # the user's address survives


def test_keep_floatingip_detaches_ours() -> None:
    fake = FakeOctavia("RegionOne")
    reconciler(fake).ensure(EXT, UID, "ns/web")
    reconciler(fake).delete(EXT.name, UID, keep_floatingip=True)
    (fip,) = fake.fips.values()
    assert fip.port_id == "" and fake.lbs == {}


def test_source_ranges_restrict_every_listener_and_follow_changes() -> None:
    """Issue 26 item 10: spec.loadBalancerSourceRanges was ignored (open to the world)."""
    fake = FakeOctavia("RegionOne")
    ann = {m.ANN_SOURCE_RANGES: "10.9.0.0/16, 192.0.2.7/32"}
    reconciler(fake).ensure(desired(annotations=ann), UID, "ns/web")
    (listener,) = fake.listeners.values()
    assert listener.allowed_cidrs == ("10.9.0.0/16", "192.0.2.7/32")
    reconciler(fake).ensure(desired(annotations={m.ANN_SOURCE_RANGES: "10.9.0.0/16"}), UID, "ns/web")
    assert [lst.allowed_cidrs for lst in fake.listeners.values()] == [("10.9.0.0/16",)]
    reconciler(fake).ensure(desired(), UID, "ns/web")  # ranges removed: open again
    assert [lst.allowed_cidrs for lst in fake.listeners.values()] == [()]


def test_an_octavia_that_cannot_restrict_sources_does_not_expose_the_service() -> None:
    import pytest

    from isthmus.ccm.openstack.loadbalancer.octavia import LBError

    fake = FakeOctavia("RegionOne", ignores_cidrs=True)
    with pytest.raises(LBError, match="does not restrict sources"):
        reconciler(fake).ensure(desired(annotations={m.ANN_SOURCE_RANGES: "10.9.0.0/16"}), UID, "ns/web")
    assert fake.listeners == {}


def test_a_local_traffic_policy_checks_kube_proxys_health_port() -> None:
    """Issue 26 item 10: with externalTrafficPolicy: Local, nodes without an endpoint
    must leave the pool: an HTTP monitor on healthCheckNodePort's /healthz (OCCM's)."""
    fake = FakeOctavia("RegionOne")
    service = m.ServiceView("ns", "web", UID, "LoadBalancer", (m.ServicePort("http", "TCP", 80, 30080),),
                            local_health_port=32000)
    lb_nodes = [m.LBNode("n1", "RegionOne", "10.0.0.1", True, False, False)]
    local = plan_service(service, lb_nodes, CONFIG, ("RegionOne",), "c").load_balancers["RegionOne"]
    reconciler(fake).ensure(local, UID, "ns/web")
    (monitor,) = fake.monitors.values()
    assert (monitor.type, monitor.url_path) == ("HTTP", "/healthz")
    (members,) = fake.members_.values()
    assert [(r.port, r.monitor_port) for r in members.values()] == [(30080, 32000)]
    reconciler(fake).ensure(desired(nodes=(("n1", "10.0.0.1"),)), UID, "ns/web")  # back to Cluster
    (monitor,) = fake.monitors.values()
    assert (monitor.type, monitor.url_path) == ("TCP", "")
    (members,) = fake.members_.values()
    assert [(r.port, r.monitor_port) for r in members.values()] == [(30080, 0)]
