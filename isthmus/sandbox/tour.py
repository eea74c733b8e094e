"""A short scripted tour of a running sandbox, printing each step as it goes.

For now every region has its own Neutron, so the tour makes one network per region;
once cross-region networking lands it becomes one network spanning the regions.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from isthmus.sandbox import glance, nova
from isthmus.sandbox.layout import CENTRAL_REGION, PASSWORD, Layout

NETWORK = "tour-net"


def _connect(layout: Layout, region: str, user: str = "demo"):
    import openstack

    return openstack.connect(
        auth_url=layout.auth_url, username=user, password=PASSWORD, project_name=user,
        user_domain_name="Default", project_domain_name="Default", region_name=region,
    )


def run(layout: Layout, keep: bool = False, out: TextIO = sys.stdout) -> int:
    def say(text: str) -> None:
        print(text, file=out, flush=True)

    if not layout.compute:
        say("this sandbox runs without compute (--no-compute): nothing to boot")
        return 1
    admin = _connect(layout, CENTRAL_REGION, user="admin")
    say(f"Regions in the catalog: {', '.join(sorted(r.id for r in admin.identity.regions()))}")
    rows = []
    for index, region in enumerate(layout.regions):
        conn = _connect(layout, region)
        say(f"\n== {region} (availability zone {layout.availability_zone(region)})")
        net = conn.network.find_network(NETWORK) or conn.network.create_network(name=NETWORK)
        if not list(conn.network.subnets(network_id=net.id)):
            conn.network.create_subnet(network_id=net.id, ip_version=4, cidr=f"10.{index + 10}.0.0/24", name=f"{NETWORK}-v4")
        say(f"network {NETWORK}: {net.id}")
        image = conn.image.find_image(glance.TINY_IMAGE)
        flavor = conn.compute.find_flavor(nova.FLAVOR)
        name = f"tour-{region.lower()}"
        started = time.monotonic()
        say(f"booting server {name} (image {image.name}, flavor {flavor.name}) ...")
        server = conn.compute.create_server(name=name, image_id=image.id, flavor_id=flavor.id, networks=[{"uuid": net.id}])
        server = conn.compute.wait_for_server(server, wait=180)
        # Binding attributes are admin-only: read the port as admin.
        port = next(iter(_connect(layout, region, user="admin").network.ports(device_id=server.id)))
        say(f"server {name} is {server.status} after {time.monotonic() - started:.1f}s; port {port.id} "
            f"status {port.status}, bound to {port.binding_host_id} ({port.binding_vif_type})")
        ip = ", ".join(a["addr"] for addrs in server.addresses.values() for a in addrs)
        rows.append((region, name, server.status, server.availability_zone, ip, port.binding_host_id))
    say("\nServers:")
    header = ("REGION", "SERVER", "STATUS", "AZ", "IP", "HOST")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        say("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    if not keep:
        say("\ncleaning up (use --keep to leave the servers and networks)")
        for region in layout.regions:
            _cleanup(_connect(layout, region), f"tour-{region.lower()}")
    return 0


def _cleanup(conn, server_name: str) -> None:
    server = conn.compute.find_server(server_name)
    if server:
        conn.compute.delete_server(server)
        conn.compute.wait_for_delete(server, wait=120)
    net = conn.network.find_network(NETWORK)
    if net:
        for port in conn.network.ports(network_id=net.id, device_owner=""):
            conn.network.delete_port(port)
        conn.network.delete_network(net)
