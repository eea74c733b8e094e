"""isthmus-gateway overhead: the same regional Nova through the gateway and directly.

Against a running sandbox (``isthmus sandbox up``): show, create and list latency
(p50/p95) through CentralRegion's gateway vs RegionOne's nova-api directly, and a
list merged over every region vs the slowest region listed alone. Ratios are
against the direct call measured in the same run (absolute numbers are noisy).

Then, unless ``--no-fault``: ``--clients`` concurrent clients for ``--load-seconds``
(shows and lists; failed requests counted), and the last region's nova-api
stopped with SIGSTOP (it accepts connections and never answers): list latency
against ``list_timeout`` (first list, then with the breaker open) and the rate of
creates in the first region against the same rate measured without the fault.

    .venv/bin/python bench/gateway.py --state-dir .sandbox [--rounds 30] [--servers 4]
                                      [--clients 50] [--load-seconds 60] [--no-fault]
"""

from __future__ import annotations

import argparse
import configparser
import os
import signal
import statistics
import sys
import threading
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
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients of the load phase")
    parser.add_argument("--load-seconds", type=float, default=60.0)
    parser.add_argument("--creates", type=int, default=6, help="creates per rate measurement")
    parser.add_argument("--no-fault", action="store_true", help="skip the load and SIGSTOP phases")
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
        show_direct = timed(lambda: http.get(f"{direct[first]}/servers/{sid}", timeout=60).raise_for_status(),
                            args.rounds)
        show_gw = timed(lambda: http.get(f"{gw}/servers/{sid}", timeout=60).raise_for_status(), args.rounds)
        rows += [("show", "direct " + first, show_direct, show_direct), ("show", "gateway", show_gw, show_direct)]
        n = max(3, args.rounds // 6)
        create_direct = timed(lambda: create(direct[first]), n)
        create_gw = timed(lambda: create(gw, layout.availability_zone(first)), n)
        rows += [("create", "direct " + first, create_direct, create_direct),
                 ("create", "gateway", create_gw, create_direct)]
        query = f"/servers/detail?all_tenants=1&name={tag}"
        alone = {r: timed(lambda r=r: http.get(direct[r] + query, timeout=60).raise_for_status(), args.rounds)
                 for r in layout.regions}
        slowest = max(alone.values(), key=statistics.median)
        merged = timed(lambda: http.get(gw + query, timeout=60).raise_for_status(), args.rounds)
        for region, samples in alone.items():
            rows.append(("list", f"direct {region}", samples, slowest))
        rows.append(("list", f"gateway, {len(layout.regions)} regions", merged, slowest))
        if not args.no_fault:
            extra = load_phase(token, gw, sid, query, args.clients, args.load_seconds)
            extra += fault_phase(layout, http, gw, query, lambda: create(gw, layout.availability_zone(first)),
                                 args.creates, made)
    finally:
        for server_id in made:
            http.delete(f"{gw}/servers/{server_id}", timeout=60)

    print(f"{'op':8} {'path':28} {'p50 ms':>8} {'p95 ms':>8} {'p50 ratio':>10}")
    for op, path, samples, base in rows:
        print(f"{op:8} {path:28} {pct(samples, .5):8.1f} {pct(samples, .95):8.1f} "
              f"{pct(samples, .5) / pct(base, .5):10.2f}")
    print("ratio: show/create vs the direct call; list vs the slowest region listed alone")
    if not args.no_fault:
        print()
        print(f"{'measure':52} {'value':>12} {'baseline':>12} {'ratio':>8}")
        for what, value, base in extra:
            ratio = f"{value / base:8.2f}" if base else f"{'-':>8}"
            print(f"{what:52} {value:12.2f} {base:12.2f} {ratio}")
    return 0


def load_phase(token: str, gw: str, sid: str, query: str, clients: int, seconds: float) -> list[tuple]:
    """``clients`` threads alternating a show and a merged list for ``seconds``."""
    results: list[tuple[float, bool]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(n: int) -> None:
        http = requests.Session()
        http.headers["X-Auth-Token"] = token
        urls = (f"{gw}/servers/{sid}", gw + query)
        i = n
        while time.monotonic() < deadline:
            start = time.perf_counter()
            try:
                ok = http.get(urls[i % 2], timeout=120).status_code < 400
            except requests.RequestException:
                ok = False
            with lock:
                results.append(((time.perf_counter() - start) * 1000, ok))
            i += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    latencies = [ms for ms, _ in results]
    failed = sum(1 for _, ok in results if not ok)
    return [(f"load: {clients} clients x {seconds:.0f}s, requests", len(results), 0),
            ("load: failed requests", failed, 0),
            ("load: p50 ms", pct(latencies, .5), 0), ("load: p95 ms", pct(latencies, .95), 0)]


def fault_phase(layout, http, gw: str, query: str, create, creates: int, made: list[str]) -> list[tuple]:
    """The last region's nova-api SIGSTOPped: list latency and the first region's create rate."""
    from isthmus.sandbox import process

    list_timeout = _list_timeout(layout)

    def create_rate() -> float:
        start = time.perf_counter()
        for _ in range(creates):
            server_id = create()
            http.delete(f"{gw}/servers/{server_id}", timeout=60)
            made.remove(server_id)
        return creates / (time.perf_counter() - start)

    def list_seconds() -> float:
        start = time.perf_counter()
        http.get(gw + query, timeout=120).raise_for_status()
        return time.perf_counter() - start

    healthy_rate = create_rate()
    victim = f"nova-api-{layout.regions[-1]}"
    record = next(r for r in process.ServiceRecord.load_all(layout.run) if r.name == victim)
    os.killpg(record.pid, signal.SIGSTOP)
    try:
        first_list = list_seconds()
        open_lists = [list_seconds() for _ in range(5)]
        faulty_rate = create_rate()
    finally:
        os.killpg(record.pid, signal.SIGCONT)
    return [(f"{victim} stopped: first list s (vs list_timeout)", first_list, list_timeout),
            ("  next lists, breaker open, max s (vs list_timeout)", max(open_lists), list_timeout),
            (f"creates/s in {layout.regions[0]}: stopped vs healthy", faulty_rate, healthy_rate)]


def _list_timeout(layout) -> float:
    conf = configparser.ConfigParser()
    conf.read(layout.etc / "isthmus" / "gateway.conf")
    return conf.getfloat("gateway", "list_timeout", fallback=10.0)


if __name__ == "__main__":
    sys.exit(main())
