"""Time from a server becoming ACTIVE to its first answered ping, from another
region against from its own region, on a running ``--dataplane`` sandbox.

    .venv/bin/python bench/dataplane.py --state-dir .sandbox [--servers 20] [--ovn]

``--ovn``: the sandbox's first two regions run ML2/OVN (``sandbox up --ovn``): the
same figures over geneve, with remote ports instead of shadows (docs/ovn.md).

One central network; a pinger server in RegionTwo (cross-region) and one in
RegionOne (same region, the baseline). Then servers are booted in RegionOne one
after the other; from the moment each is seen ACTIVE, both pingers ping it at
once until it answers. The same-region figure is what a server costs the
dataplane agent alone (namespace, interface, bridge); the cross-region one adds
the worker's shadow in RegionTwo and RegionTwo's agent programming the tunnel.
"""

from __future__ import annotations

import argparse
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import connect, pct

from isthmus.sandbox.dataplane import host as dataplane
from isthmus.sandbox.layout import CENTRAL_REGION, Layout

POLL = 0.2  # seconds between status polls and between pings
TIMEOUT = 300.0


def boot(conn, name: str, network_id: str):
    image = conn.image.find_image("tiny", ignore_missing=False)
    flavor = conn.compute.find_flavor("m1.tiny", ignore_missing=False)
    return conn.compute.create_server(name=name, image_id=image.id, flavor_id=flavor.id,
                                      networks=[{"uuid": network_id}])


def wait_active(conn, server) -> float:
    """The monotonic time at which the server was first seen ACTIVE."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        server = conn.compute.get_server(server.id)
        if server.status == "ACTIVE":
            return time.monotonic()
        if server.status == "ERROR":
            raise SystemExit(f"server {server.id} went to ERROR: {server.fault}")
        time.sleep(POLL)
    raise SystemExit(f"server {server.id} not ACTIVE within {TIMEOUT:.0f}s")


def first_reply(layout: Layout, pinger_id: str, address: str, since: float) -> float:
    """Seconds from ``since`` until ``address`` answers a ping from the pinger."""
    namespace = dataplane.server_namespace(layout, pinger_id)
    deadline = since + TIMEOUT
    while time.monotonic() < deadline:
        if namespace and dataplane.ping(namespace, address, wait=POLL):
            return time.monotonic() - since
        namespace = namespace or dataplane.server_namespace(layout, pinger_id)
        time.sleep(POLL / 2)
    raise SystemExit(f"{address} never answered {pinger_id} within {TIMEOUT:.0f}s")


def address_of(server) -> str:
    return next(a["addr"] for addrs in server.addresses.values() for a in addrs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, default=Path(".sandbox"))
    parser.add_argument("--servers", type=int, default=20)
    parser.add_argument("--ovn", action="store_true", help="the first two regions must run ML2/OVN (up --ovn)")
    args = parser.parse_args()
    layout = Layout.load(args.state_dir)
    if layout is None or not layout.dataplane or layout.plain or len(layout.regions) < 2:
        raise SystemExit("needs a running sandbox with --dataplane, Isthmus networking and two regions")
    one, two = layout.regions[:2]
    ovn = layout.is_ovn(one) and layout.is_ovn(two)
    if args.ovn and not ovn:
        raise SystemExit(f"--ovn: {one} and {two} must run ML2/OVN (isthmus sandbox up --ovn)")
    central, r1, r2 = (connect(layout, r, "demo") for r in (CENTRAL_REGION, one, two))
    tag = f"bench-dp-{uuid.uuid4().hex[:6]}"
    net = central.network.create_network(name=tag)
    central.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.91.0.0/24")
    same, cross = [], []
    try:
        pinger_here = r1.compute.wait_for_server(boot(r1, tag, net.id), wait=TIMEOUT)
        pinger_there = r2.compute.wait_for_server(boot(r2, tag, net.id), wait=TIMEOUT)
        first_reply(layout, pinger_there.id, address_of(pinger_here), time.monotonic())  # both wired
        with ThreadPoolExecutor(max_workers=2) as pool:
            for i in range(args.servers):
                server = boot(r1, tag, net.id)
                active = wait_active(r1, server)
                address = address_of(r1.compute.get_server(server.id))
                here = pool.submit(first_reply, layout, pinger_here.id, address, active)
                there = pool.submit(first_reply, layout, pinger_there.id, address, active)
                same.append(here.result())
                cross.append(there.result())
                print(f"  server {i + 1:2d}: same region {same[-1]:5.1f}s  from {two} {cross[-1]:5.1f}s", flush=True)
    finally:
        for conn in (r1, r2):
            for server in list(conn.compute.servers(name=tag)):
                conn.compute.delete_server(server)
            for server in list(conn.compute.servers(name=tag)):
                conn.compute.wait_for_delete(server, wait=TIMEOUT)
        for _ in range(60):
            try:
                central.network.delete_network(net.id)
                break
            except Exception:  # noqa: BLE001 - ports of deleted servers may still be going
                time.sleep(1)

    rows = [("ACTIVE -> first ping, p50", pct(same, 0.5), pct(cross, 0.5)),
            ("ACTIVE -> first ping, p95", pct(same, 0.95), pct(cross, 0.95))]
    backend = "ML2/OVN, geneve, remote ports" if ovn else "sandbox binder, VXLAN, shadows"
    print(f"\n{args.servers} servers booted in {one}; pinged from {one} (baseline) and from {two} ({backend})\n")
    print(f"{'measure':28} {'same region':>12} {'cross-region':>13} {'ratio':>7}")
    for label, base, value in rows:
        print(f"{label:28} {base:11.2f}s {value:12.2f}s {value / base if base else float('inf'):6.1f}x")


if __name__ == "__main__":
    main()
