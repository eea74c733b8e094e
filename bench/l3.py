"""Cross-region routers: how long until a change at central is carried out.

    .venv/bin/python bench/l3.py --state-dir .sandbox [--rounds 8]

Per round, with one network hinted to RegionOne and one to RegionTwo, each with
a bound port (what Nova leaves), the clock runs from the central call until the
regions show the result:

* baseline: a port bound in RegionOne -> its shadow in RegionTwo (port_sync,
  the L2 path every router change also rides on);
* add-interface: the second ``router add subnet`` -> both halves hold the route
  to the other region's subnet;
* floating IP associate -> the regional floating IP exists on the port in the
  external network's region;
* floating IP associate -> ACTIVE at central: with ``--dataplane`` the region's
  L3 agent (the dataplane agent) loaded its NAT, so it is reachable (the test
  suite pings it through a real server); without, it never gets there and the
  row says so.

Prints p50/p95 and ratios against the baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path

from common import connect, pct

from isthmus.sandbox.layout import CENTRAL_REGION, Layout

HALF_TAG = "isthmus:half-of:"


def wait(check, timeout: float = 300.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(0.2)
    raise TimeoutError("no convergence within the timeout")


def half_routes(conn, router_id: str) -> set[str]:
    for router in conn.network.routers():
        if router.description == f"{HALF_TAG}{router_id}":
            return {r["destination"] for r in router.routes or []}
    return set()


def bound_port(admin, region: str, network_id: str):
    return admin.network.create_port(network_id=network_id, binding_host_id=f"{region.lower()}-compute",
                                     device_owner="compute:nova", device_id=str(uuid.uuid4()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, default=Path(".sandbox"))
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    layout = Layout.load(args.state_dir)
    if layout is None or layout.plain or len(layout.regions) < 2:
        raise SystemExit("needs a running sandbox with Isthmus networking and two regions")
    one, two = layout.regions[:2]
    central = connect(layout, CENTRAL_REGION, "admin")
    admin = {r: connect(layout, r, "admin") for r in (one, two)}
    tag = f"bench-l3-{uuid.uuid4().hex[:6]}"
    shadow, routes, fips, active = [], [], [], []
    ext = central.network.create_network(name=f"{tag}-ext", is_router_external=True, provider_network_type="flat",
                                         provider_physical_network="public", availability_zone_hints=[two])
    central.network.create_subnet(network_id=ext.id, ip_version=4, cidr="172.24.90.0/24", is_dhcp_enabled=False)
    made: list = []
    try:
        for i in range(args.rounds):
            net_a = central.network.create_network(name=f"{tag}-a{i}", availability_zone_hints=[one])
            sub_a = central.network.create_subnet(network_id=net_a.id, ip_version=4, cidr=f"10.{150 + i}.1.0/24")
            net_b = central.network.create_network(name=f"{tag}-b{i}", availability_zone_hints=[two])
            sub_b = central.network.create_subnet(network_id=net_b.id, ip_version=4, cidr=f"10.{150 + i}.2.0/24")
            router = central.network.create_router(name=f"{tag}-{i}", external_gateway_info={"network_id": ext.id})
            made.append((router, [net_a, net_b]))
            central.network.add_interface_to_router(router.id, subnet=sub_a.id)

            # Baseline: L2, one port bound in RegionOne seen as a shadow in RegionTwo.
            stretched = central.network.create_network(name=f"{tag}-s{i}")
            central.network.create_subnet(network_id=stretched.id, ip_version=4, cidr=f"10.{170 + i}.0.0/24")
            made[-1][1].append(stretched)
            bound_port(admin[two], two, stretched.id)
            started = time.monotonic()
            port = bound_port(admin[one], one, stretched.id)
            wait(lambda: any(True for _ in admin[two].network.ports(network_id=stretched.id,  # noqa: B023 - polled within this iteration
                                                                    mac_address=port.mac_address)))  # noqa: B023 - polled within this iteration
            shadow.append(time.monotonic() - started)

            bound_port(admin[one], one, net_a.id)
            server_port = bound_port(admin[two], two, net_b.id)
            wait(lambda: half_routes(admin[one], router.id))  # the first interface settled  # noqa: B023 - polled within this iteration
            started = time.monotonic()
            central.network.add_interface_to_router(router.id, subnet=sub_b.id)
            wait(lambda: sub_b.cidr in half_routes(admin[one], router.id)  # noqa: B023 - polled within this iteration
                 and sub_a.cidr in half_routes(admin[two], router.id))  # noqa: B023 - polled within this iteration
            routes.append(time.monotonic() - started)

            fip = central.network.create_ip(floating_network_id=ext.id)
            started = time.monotonic()
            central.network.update_ip(fip, port_id=server_port.id)
            wait(lambda: any(f.port_id == server_port.id  # noqa: B023 - polled within this iteration
                             for f in admin[two].network.ips(floating_ip_address=fip.floating_ip_address)))  # noqa: B023 - polled within this iteration
            fips.append(time.monotonic() - started)
            if layout.dataplane:
                wait(lambda: central.network.get_ip(fip.id).status == "ACTIVE")  # noqa: B023 - polled within this iteration
                active.append(time.monotonic() - started)
            central.network.delete_ip(fip)
            print(f"round {i + 1}: shadow {shadow[-1]:.1f} s, routes {routes[-1]:.1f} s, floating IP {fips[-1]:.1f} s"
                  + (f", ACTIVE at central {active[-1]:.1f} s" if active else ""), flush=True)
    finally:
        for router, networks in made:
            central.network.update_router(router.id, routes=[], external_gateway_info={})
            for port in central.network.ports(device_id=router.id, device_owner="network:router_interface"):
                central.network.remove_interface_from_router(router.id, port=port.id)
            central.network.delete_router(router.id)
            for network in networks:
                for region in (one, two):
                    for port in admin[region].network.ports(network_id=network.id, device_owner="compute:nova"):
                        admin[region].network.delete_port(port.id)
        time.sleep(5)
        for _, networks in made:
            for network in networks:
                central.network.delete_network(network.id, ignore_missing=True)
        central.network.delete_network(ext.id, ignore_missing=True)

    base50, base95 = pct(shadow, 0.5), pct(shadow, 0.95)
    print(f"\n{args.rounds} rounds, {len(layout.regions)} regions")
    print("| measure | p50 | p95 | p50 vs baseline |")
    print("|---|---|---|---|")
    print(f"| baseline: port bound -> shadow in the other region | {base50:.1f} s | {base95:.1f} s | 1.0x |")
    print(f"| add interface -> routes in both halves | {pct(routes, 0.5):.1f} s | {pct(routes, 0.95):.1f} s "
          f"| {pct(routes, 0.5) / base50:.1f}x |")
    print(f"| floating IP associate -> regional floating IP | {pct(fips, 0.5):.1f} s | {pct(fips, 0.95):.1f} s "
          f"| {pct(fips, 0.5) / base50:.1f}x |")
    if active:
        print(f"| floating IP associate -> ACTIVE at central (NAT loaded) | {pct(active, 0.5):.1f} s "
              f"| {pct(active, 0.95):.1f} s | {pct(active, 0.5) / base50:.1f}x |")
    else:
        print("| floating IP associate -> ACTIVE at central | - | - | needs --dataplane (no L3 agent wires it) |")


if __name__ == "__main__":
    main()
