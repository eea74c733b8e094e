"""isthmus-gateway overhead: the same regional Nova through the gateway and directly.

Against a running sandbox (``isthmus sandbox up``): show, create and list latency
(p50/p95) through CentralRegion's gateway vs RegionOne's nova-api directly, and a
list merged over every region vs the slowest region listed alone. Ratios are
against the direct call measured in the same run (absolute numbers are noisy).

    .venv/bin/python bench/gateway.py --state-dir .sandbox [--rounds 30] [--servers 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import requests

from common import pct

NONE_NET = {"OpenStack-API-Version": "compute 2.37"}


def timed(fn, rounds: int) -> list[float]:
    fn()  # warm connections and caches
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", default=".sandbox")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--servers", type=int, default=4, help="servers per region to list")
    args = parser.parse_args()

    from isthmus.sandbox.glance import TINY_IMAGE_ID
    from isthmus.sandbox.keystone import admin_connection
    from isthmus.sandbox.layout import Layout
    from isthmus.sandbox.nova import FLAVOR_ID

    layout = Layout.load(Path(args.state_dir))
    if layout is None:
        print(f"no sandbox in {args.state_dir}", file=sys.stderr)
        return 2
    conn = admin_connection(layout)
    token = conn.session.get_token()
    http = requests.Session()
    http.headers["X-Auth-Token"] = token
    gw = f"http://127.0.0.1:{layout.gateway_port}/compute/v2.1"
    direct = {r: f"http://127.0.0.1:{layout.region_port(r, 'nova')}/v2.1" for r in layout.regions}
    first = layout.regions[0]
    tag = f"bench-{uuid.uuid4().hex[:6]}"
    made: list[str] = []

    def create(base: str, az: str | None = None) -> str:
        server = {"name": tag, "imageRef": TINY_IMAGE_ID, "flavorRef": FLAVOR_ID, "networks": "none"}
        if az:
            server["availability_zone"] = az
        resp = http.post(base + "/servers", json={"server": server}, headers=NONE_NET, timeout=120)
        resp.raise_for_status()
        made.append(resp.json()["server"]["id"])
        return made[-1]

    rows = []
    try:
        for region in layout.regions:
            for _ in range(args.servers):
                create(gw, layout.availability_zone(region))
        sid = made[0]
        show_direct = timed(lambda: http.get(f"{direct[first]}/servers/{sid}", timeout=60).raise_for_status(), args.rounds)
        show_gw = timed(lambda: http.get(f"{gw}/servers/{sid}", timeout=60).raise_for_status(), args.rounds)
        rows += [("show", "direct " + first, show_direct, show_direct), ("show", "gateway", show_gw, show_direct)]
        n = max(3, args.rounds // 6)
        create_direct = timed(lambda: create(direct[first]), n)
        create_gw = timed(lambda: create(gw, layout.availability_zone(first)), n)
        rows += [("create", "direct " + first, create_direct, create_direct), ("create", "gateway", create_gw, create_direct)]
        query = f"/servers/detail?all_tenants=1&name={tag}"
        alone = {r: timed(lambda r=r: http.get(direct[r] + query, timeout=60).raise_for_status(), args.rounds)
                 for r in layout.regions}
        slowest = max(alone.values(), key=statistics.median)
        merged = timed(lambda: http.get(gw + query, timeout=60).raise_for_status(), args.rounds)
        for region, samples in alone.items():
            rows.append(("list", f"direct {region}", samples, slowest))
        rows.append(("list", f"gateway, {len(layout.regions)} regions", merged, slowest))
    finally:
        for server_id in made:
            http.delete(f"{gw}/servers/{server_id}", timeout=60)

    print(f"{'op':8} {'path':28} {'p50 ms':>8} {'p95 ms':>8} {'p50 ratio':>10}")
    for op, path, samples, base in rows:
        print(f"{op:8} {path:28} {pct(samples, .5):8.1f} {pct(samples, .95):8.1f} "
              f"{pct(samples, .5) / pct(base, .5):10.2f}")
    print("ratio: show/create vs the direct call; list vs the slowest region listed alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
