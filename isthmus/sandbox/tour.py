"""A short scripted tour of a running sandbox, printing each step as it goes.

With Isthmus networking (the default) it creates one network in CentralRegion,
boots a server on it in every region, and shows that the regions share it: one
UUID, one address pool, each region's copy of the other's port (its shadow).
With ``--dataplane`` each server then pings every other one across regions.
With ``--plain`` each region has its own network, as stock OpenStack does.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from isthmus.network import SHADOW_OWNER
from isthmus.polling import poll
from isthmus.sandbox import glance, nova
from isthmus.sandbox.layout import CENTRAL_REGION, PASSWORD, Layout

NETWORK = "tour-net"


def _connect(layout: Layout, region: str, user: str = "demo"):
    import openstack

    return openstack.connect(
        auth_url=layout.auth_url, username=user, password=PASSWORD, project_name=user,
        user_domain_name="Default", project_domain_name="Default", region_name=region,
    )


def _network(conn, cidr: str):
    net = conn.network.find_network(NETWORK) or conn.network.create_network(name=NETWORK)
    if not list(conn.network.subnets(network_id=net.id)):
        conn.network.create_subnet(network_id=net.id, ip_version=4, cidr=cidr, name=f"{NETWORK}-v4")
    return net


def run(layout: Layout, keep: bool = False, out: TextIO = sys.stdout) -> int:
    def say(text: str) -> None:
        print(text, file=out, flush=True)

    if not layout.compute:
        say("this sandbox runs without compute (--no-compute): nothing to boot")
        return 1
    admin = _connect(layout, CENTRAL_REGION, user="admin")
    say(f"Regions in the catalog: {', '.join(sorted(r.id for r in admin.identity.regions()))}")
    shared = None
    if not layout.plain:
        shared = _network(_connect(layout, CENTRAL_REGION), "10.10.0.0/24")
        say(f"\nnetwork {NETWORK} created once, in {CENTRAL_REGION}: {shared.id}")
    rows = []
    server_ids: dict[str, str] = {}
    for index, region in enumerate(layout.regions):
        conn = _connect(layout, region)
        say(f"\n== {region} (availability zone {layout.availability_zone(region)})")
        net = shared or _network(conn, f"10.{index + 10}.0.0/24")
        if not shared:
            say(f"network {NETWORK} (this region's own): {net.id}")
        image = conn.image.find_image(glance.TINY_IMAGE)
        flavor = conn.compute.find_flavor(nova.FLAVOR)
        name = f"tour-{region.lower()}"
        started = time.monotonic()
        say(f"booting server {name} on {net.id} (image {image.name}, flavor {flavor.name}) ...")
        server = conn.compute.create_server(name=name, image_id=image.id, flavor_id=flavor.id,
                                            networks=[{"uuid": net.id}])
        server = conn.compute.wait_for_server(server, wait=240)
        # Binding attributes are admin-only: read the port as admin.
        port = next(iter(_connect(layout, region, user="admin").network.ports(device_id=server.id)))
        say(f"server {name} is {server.status} after {time.monotonic() - started:.1f}s; port {port.id} "
            f"status {port.status}, bound to {port.binding_host_id} ({port.binding_vif_type})")
        ip = ", ".join(a["addr"] for addrs in server.addresses.values() for a in addrs)
        server_ids[region] = server.id
        rows.append((region, name, server.status, server.availability_zone, ip, port.binding_host_id, port.id))
    say("\nServers:")
    _table(say, ("REGION", "SERVER", "STATUS", "AZ", "IP", "HOST", "PORT"), rows)
    failed = 0
    if shared:
        _show_sharing(layout, say, shared.id, rows)
        if layout.dataplane:
            failed = _show_pings(layout, say, rows, server_ids)
    if not keep:
        say("\ncleaning up (use --keep to leave the servers and networks)")
        for region in layout.regions:
            _cleanup_servers(_connect(layout, region), f"tour-{region.lower()}")
        _cleanup_network(_connect(layout, CENTRAL_REGION) if shared else None, layout, bool(shared))
    return 1 if failed else 0


def _show_pings(layout: Layout, say, rows, server_ids: dict[str, str], timeout: float = 120) -> int:
    """Ping from each server's namespace to every other server's address (the
    dataplane agents wire them within seconds of the shadows); the failures."""
    from isthmus.sandbox.dataplane import host as dataplane

    say("\nCross-region pings (from each server's namespace, over VXLAN between the regions' hosts):")
    failed = 0
    for source, source_name, *_ in rows:
        for target, target_name, _, _, ip, *_ in rows:
            if source == target:
                continue
            started = time.monotonic()
            ok = False
            while not ok and time.monotonic() - started < timeout:
                namespace = dataplane.server_namespace(layout, server_ids[source])
                ok = namespace is not None and dataplane.ping(namespace, ip)
                if not ok:
                    time.sleep(0.5)
            failed += not ok
            say(f"  {source_name} -> {target_name} ({ip}): "
                + (f"reply after {time.monotonic() - started:.1f}s" if ok else f"NO REPLY within {timeout:.0f}s"))
    return failed


def _show_sharing(layout: Layout, say, network_id: str, rows) -> None:
    """Each region holds the network under the same UUID and a shadow of every
    port bound elsewhere (made by isthmus-xjob, so wait for it)."""
    say(f"\nThe network in each region (same UUID {network_id}):")
    deadline = time.monotonic() + 120
    for region in layout.regions:
        conn = _connect(layout, region, user="admin")
        copy = conn.network.get_network(network_id)
        others = [r for r in rows if r[0] != region]

        def shadows_here(conn=conn, others=others) -> tuple[list, ...]:
            found = list(conn.network.ports(network_id=network_id, device_owner=SHADOW_OWNER))
            return (found,) if len(found) >= len(others) else ()  # (): not yet

        try:
            shadows = poll(shadows_here, max(deadline - time.monotonic(), 0), f"shadows in {region}")[0]
        except TimeoutError:
            shadows = list(conn.network.ports(network_id=network_id, device_owner=SHADOW_OWNER))
        say(f"  {region}: segment {copy.provider_network_type}/{copy.provider_segmentation_id}; "
            f"shadows of remote ports: " + (", ".join(f"{p.fixed_ips[0]['ip_address']} (on {p.binding_host_id})"
                                                      for p in shadows) or "none yet"))


def _table(say, header, rows) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        say("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)))


def _cleanup_servers(conn, server_name: str) -> None:
    servers = [s for s in conn.compute.servers(name=server_name) if s.name == server_name]
    for server in servers:
        conn.compute.delete_server(server)
    for server in servers:
        conn.compute.wait_for_delete(server, wait=120)


def _cleanup_network(central, layout: Layout, shared: bool) -> None:
    conns = [central] if shared else [_connect(layout, r) for r in layout.regions]
    for conn in conns:
        net = conn.network.find_network(NETWORK)
        if not net:
            continue
        for port in conn.network.ports(network_id=net.id):
            if not (port.device_owner or "").startswith("network:"):
                conn.network.delete_port(port)
        for _ in range(30):  # ports of deleted servers may still be going
            try:
                conn.network.delete_network(net)
                break
            except Exception:  # noqa: BLE001 - retried, then reported by the last attempt
                time.sleep(1)
