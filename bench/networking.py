"""Cross-region networking costs, measured against a running sandbox.

    .venv/bin/python bench/networking.py --state-dir .sandbox [--rounds 5]

Prints three tables (ratios against a baseline measured in the same run):

1. boot time: first boot on a central network no region has copied yet, a second
   boot on it (copy exists), against a boot on a network of the region alone
   (the local plugin passes those through to ML2, as ``--plain`` would);
2. latency from a port bound in RegionOne (server ACTIVE) to its shadow in
   RegionTwo, p50/p95;
3. regional Neutron requests caused by central list calls (must be 0: central
   never fans a list out to the regions).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from pathlib import Path

from common import connect, pct

from isthmus.network import SHADOW_OWNER
from isthmus.sandbox.layout import CENTRAL_REGION, Layout


def boot(conn, name: str, network_id: str) -> float:
    image = conn.image.find_image("tiny", ignore_missing=False)
    flavor = conn.compute.find_flavor("m1.tiny", ignore_missing=False)
    started = time.monotonic()
    server = conn.compute.create_server(name=name, image_id=image.id, flavor_id=flavor.id,
                                        networks=[{"uuid": network_id}])
    conn.compute.wait_for_server(server, wait=300)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, default=Path(".sandbox"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    layout = Layout.load(args.state_dir)
    if layout is None or layout.plain or len(layout.regions) < 2:
        raise SystemExit("needs a running sandbox with Isthmus networking and two regions")
    one, two = layout.regions[:2]
    central, r1, r2 = (connect(layout, r, "demo") for r in (CENTRAL_REGION, one, two))
    admin2 = connect(layout, two, user="admin")
    tag = f"bench-{uuid.uuid4().hex[:6]}"
    first, second, local, shadow = [], [], [], []
    made = []
    try:
        for i in range(args.rounds):
            net = central.network.create_network(name=f"{tag}-{i}")
            central.network.create_subnet(network_id=net.id, ip_version=4, cidr=f"10.{200 + i}.0.0/24")
            own = r1.network.create_network(name=f"{tag}-own-{i}")
            r1.network.create_subnet(network_id=own.id, ip_version=4, cidr=f"10.{220 + i}.0.0/24")
            made.append((net, own))
            local.append(boot(r1, tag, own.id))
            first.append(boot(r1, tag, net.id))
            second.append(boot(r1, tag, net.id))
            # Shadow latency: a server in RegionTwo first (so shadows are wanted there).
            boot(r2, tag, net.id)
            boot(r1, tag, net.id)
            bound = time.monotonic()
            ports = {p.id for p in r1.network.ports(network_id=net.id) if _is_vm_port(p)}
            while time.monotonic() - bound < 120:
                shadows = {p.id for p in admin2.network.ports(network_id=net.id, device_owner=SHADOW_OWNER)}
                if ports <= shadows:
                    break
                time.sleep(0.2)
            shadow.append(time.monotonic() - bound)
        fan_out = central_list_fan_out(layout, central, made[0][0].id)
    finally:
        cleanup(layout, tag, made, central, r1)
    base = statistics.median(local)
    print(f"{'boot (RegionOne)':42} {'p50 s':>7} {'p95 s':>7} {'x base':>7}")
    for name, values in (("region-only network (baseline)", local), ("central network, first boot (copy)", first),
                         ("central network, next boot", second)):
        print(f"{name:42} {statistics.median(values):7.2f} {pct(values, .95):7.2f} "
              f"{statistics.median(values) / base:7.2f}")
    print(f"\n{'port bound in RegionOne -> shadow in RegionTwo':48} p50 {statistics.median(shadow):.2f}s  "
          f"p95 {pct(shadow, .95):.2f}s  (n={len(shadow)})")
    print(f"\nregional Neutron requests during 20 central port lists: {fan_out} (want 0)")


def _is_vm_port(port) -> bool:
    owner = port.device_owner or ""
    return owner.startswith("compute:") and owner != SHADOW_OWNER


def central_list_fan_out(layout: Layout, central, network_id: str) -> int:
    logs = [layout.logs / f"neutron-{r}.log" for r in layout.regions]
    before = [p.read_text(errors="replace").count('"GET /v2.0/') for p in logs]
    for _ in range(20):
        list(central.network.ports(network_id=network_id))
    time.sleep(1)
    return sum(p.read_text(errors="replace").count('"GET /v2.0/') - b for p, b in zip(logs, before, strict=True))


def cleanup(layout: Layout, tag: str, made, central, r1) -> None:
    for region in layout.regions:
        conn = connect(layout, region, "demo")
        for server in list(conn.compute.servers(name=tag)):
            conn.compute.delete_server(server)
        for server in list(conn.compute.servers(name=tag)):
            conn.compute.wait_for_delete(server, wait=120)
    for net, own in made:
        for conn, network in ((central, net), (r1, own)):
            for _ in range(30):
                try:
                    conn.network.delete_network(network)
                    break
                except Exception:  # noqa: BLE001 - ports of deleted servers may still be going
                    time.sleep(1)


if __name__ == "__main__":
    main()
