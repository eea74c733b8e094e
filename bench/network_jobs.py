"""Job throughput with N VM ports across the regions, measured against a running sandbox.

    .venv/bin/isthmus sandbox up --state-dir /tmp/bj --base-port 34000 \\
        --regions RegionOne,RegionTwo,RegionThree --no-compute
    .venv/bin/python bench/network_jobs.py --state-dir /tmp/bj [--ports 1000] [--workers 8] [--timeout 1800]

Without Nova, VM ports are made the way nova-compute makes them, as the sandbox
``admin`` user in a region: ``POST /v2.0/ports`` on a central network
(``device_owner=compute:nova``, a fresh ``device_id``), then ``PUT`` with
``binding:host_id=<region>-compute`` (the sandbox ML2 binder binds any host).
(A POST carrying ``binding:host_id`` is reported too; the integration tests
check that.) Ports go round-robin over
the regions, so each region should end with a shadow of every port bound in the
other regions (N*2/3 each with three regions).

``--regions N`` uses the sandbox's first N regions (start it with as many).

Prints three tables, ratios against a baseline measured in the same run:

1. port create+bind rate through the local plugin on a central network (thread
   pool) against the same operation on networks created in each region only
   (the local plugin hands those to ML2 after central answers it does not know
   the network); and the same with one client, one port after another
   (``--sequential``: latency rather than throughput);
2. job convergence: last bind -> every region holds every shadow it should,
   shadows/s (against the baseline's ports/s), bound -> shadow seen latency
   (resolution: the shadow poll interval), the floor (every region making as
   many shadows by bulk POSTs on a region-only network, all regions at once,
   measured right after), the worker's requests per bound port, and the network_sync /
   security_group_sync runs (counted in central's access log and sampled from
   the Isthmus DB) against the binding events that queued them;
3. requests reaching each regional Neutron while central answers K list calls
   (must be 0: central never fans a list out; the script exits 1 otherwise),
   with central's latency against the same list asked of a region.

Everything the bench created is deleted at the end: VM ports at central (jobs
then remove their copies and shadows in the regions), then the networks.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import connect, pct

from isthmus.network import SHADOW_OWNER, binding_report, shadow_port_name
from isthmus.sandbox.layout import CENTRAL_REGION, Layout
from isthmus.sandbox.nova import compute_host

VM_OWNER = "compute:nova"
EVENT_JOBS = ("port_sync", "sg_member_sync")
FLOOR_CHUNK = 200  # ports per bulk POST of the floor: the worker's port_sync batch size
FULL_LIST_SECONDS = 10.0  # the shadow watcher lists everything this often, the awaited ones in between
AWAITED_PER_LIST = 100  # ids per list of awaited shadows (the URL stays a few KB)
UNLOADED_PORTS = 20  # ports made one at a time, watched, for bound -> shadow with no queue
MEMBER_RULE_TAG = "isthmus:member-of:"  # the /32 member rules of the previous release
XJOB_AGENT = "isthmus-xjob"  # user agents the Isthmus clients send (isthmus/clients/regions.py)
LOCAL_AGENT = "isthmus-local"
STARTED = time.monotonic()


class BenchError(RuntimeError):
    pass


def say(message: str) -> None:
    """Progress line: the run takes minutes, so say where it is."""
    print(f"[{time.monotonic() - STARTED:7.1f}s] {message}", flush=True)


# --------------------------------------------------------------------------- clients
class Neutrons:
    """One openstacksdk connection per (thread, region): the pool's threads never
    share a session, so a slow or failed request in one cannot affect another."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._local = threading.local()

    def __call__(self, region: str):
        cache: dict[str, Any] = self._local.__dict__.setdefault("conns", {})
        if region not in cache:
            cache[region] = connect(self.layout, region, "admin").network
        return cache[region]


# A request whose connection failed before any answer is sent again, at most this
# many times, as Nova's Neutron client does ([neutron] http_retries, default 3): a
# pooled keep-alive connection the server closes as it is reused resets now and
# then. Counted and printed; an answer (any status) is never retried.
CONNECT_RETRIES = 3
connect_retries_made: Counter[str] = Counter()


def call(neutron, method: str, path: str, *, body: dict | None = None, params: dict | None = None,
         ok: Iterable[int] = (200, 201, 204)) -> dict:
    """Plain REST through the sdk's adapter: exact bodies and no sdk-side caching."""
    from keystoneauth1.exceptions import ConnectFailure

    for attempt in range(CONNECT_RETRIES + 1):
        try:
            resp = neutron.request(path, method, json=body, params=params, raise_exc=False)
            break
        except ConnectFailure:
            if attempt == CONNECT_RETRIES:
                raise
            connect_retries_made[method] += 1
            time.sleep(0.5)
    if resp.status_code not in tuple(ok):
        raise BenchError(f"{method} {path} -> {resp.status_code}: {resp.text[:300]}")
    return resp.json() if resp.content else {}


def list_ids(neutron, collection: str, **filters: Any) -> list[str]:
    key = collection.replace("-", "_")
    return [o["id"] for o in call(neutron, "GET", f"/{collection}", params={**filters, "fields": "id"})[key]]


def subnet_cidr(ports: int) -> str:
    """The smallest prefix (at most /24) that holds the ports plus the reservations
    (DHCP, one gateway per region); a random 10.x block for readability only
    (Neutron allows overlapping subnets on different networks)."""
    prefix = 24
    while 2 ** (32 - prefix) - 2 < ports + 16:
        prefix -= 1
    second = uuid.uuid4().int % 100 + 100
    return str(ipaddress.ip_network(f"10.{second}.0.0/{prefix}", strict=False))


def make_network(neutron, name: str, ports: int) -> tuple[str, str]:
    """(network id, subnet id)."""
    network = call(neutron, "POST", "/networks", body={"network": {"name": name}})["network"]
    subnet = call(neutron, "POST", "/subnets", body={"subnet": {"network_id": network["id"], "ip_version": 4,
                                                                "cidr": subnet_cidr(ports), "name": name}})["subnet"]
    return network["id"], subnet["id"]


# ------------------------------------------------------------------------ access logs
ACCESS_LINE = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3}) \S+ '
                         r'"[^"]*" "(?P<agent>[^"]*)"')


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    status: int
    agent: str


class AccessLog:
    """gunicorn's access lines in a service's log (``--access-logfile -`` shares the
    file with the service's own log). Marks are byte offsets, so a window costs
    only the bytes written during it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        return self.path.stat().st_size

    def since(self, offset: int) -> list[Request]:
        with self.path.open("rb") as handle:
            handle.seek(offset)
            text = handle.read().decode(errors="replace")
        found = (ACCESS_LINE.search(line) for line in text.splitlines())
        return [Request(m["method"], m["path"], int(m["status"]), m["agent"]) for m in found if m]


def neutron_logs(layout: Layout) -> dict[str, AccessLog]:
    return {region: AccessLog(layout.logs / f"neutron-{region}.log") for region in (CENTRAL_REGION, *layout.regions)}


def marks(logs: dict[str, AccessLog]) -> dict[str, int]:
    return {region: log.mark() for region, log in logs.items()}


# ------------------------------------------------------------------------ port making
@dataclass(frozen=True)
class MadePort:
    id: str
    region: str
    create_s: float  # the POST (through the local plugin: allocated at central first)
    bind_s: float  # the PUT with binding:host_id (reports the binding to central)
    bound_at: float  # monotonic time the PUT returned


def make_vm_port(neutrons: Neutrons, region: str, network_id: str, name: str, no_groups: bool = False) -> MadePort:
    neutron = neutrons(region)
    started = time.monotonic()
    body: dict[str, Any] = {"network_id": network_id, "name": name, "device_owner": VM_OWNER,
                            "device_id": str(uuid.uuid4())}
    if no_groups:
        body["security_groups"] = []  # no default group: no remote-member rules to keep
    port = call(neutron, "POST", "/ports", body={"port": body})["port"]
    created = time.monotonic()
    call(neutron, "PUT", f"/ports/{port['id']}", body={"port": {"binding:host_id": compute_host(region)}})
    bound = time.monotonic()
    return MadePort(port["id"], region, created - started, bound - created, bound)


@dataclass
class Batch:
    label: str
    made: list[MadePort] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    central_requests: int = 0  # requests the local plugin sent to central meanwhile

    @property
    def rate(self) -> float:
        return len(self.made) / self.wall_s if self.wall_s else 0.0


def make_ports(neutrons: Neutrons, placement: list[tuple[str, str]], workers: int, label: str, tag: str,
               sink: list[MadePort], no_groups: bool = False) -> Batch:
    """Create+bind one port per (region, network), ``workers`` at a time. Every port
    made also goes to ``sink`` at once, so cleanup finds it even if we stop early."""
    batch = Batch(label)
    started = last_note = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="port") as pool:
        futures = {pool.submit(make_vm_port, neutrons, region, net, f"{tag}-{i}", no_groups): region
                   for i, (region, net) in enumerate(placement)}
        for future in as_completed(futures):
            try:
                port = future.result()
                batch.made.append(port)
                sink.append(port)
            except Exception as err:  # noqa: BLE001 - a failed create is a result to report, not a crash
                batch.errors.append(f"{futures[future]}: {err}")
            if time.monotonic() - last_note > 10:
                last_note = time.monotonic()
                done = len(batch.made) + len(batch.errors)
                say(f"  {label}: {done}/{len(placement)} ports ({len(batch.made) / (last_note - started):.1f}/s, "
                    f"{len(batch.errors)} errors)")
    batch.wall_s = time.monotonic() - started
    return batch


def round_robin(regions: tuple[str, ...], count: int, network_of: Callable[[str], str]) -> list[tuple[str, str]]:
    return [(regions[i % len(regions)], network_of(regions[i % len(regions)])) for i in range(count)]


# --------------------------------------------------------------------- shadow watcher
class ShadowWatcher:
    """Polls each region's shadow list (one thread per region, so one slow region
    does not delay the others' timestamps) and keeps when each shadow was first seen."""

    def __init__(self, neutrons: Neutrons, regions: tuple[str, ...], network_id: str, interval: float,
                 made: list[MadePort]) -> None:
        self.neutrons, self.network_id, self.interval = neutrons, network_id, interval
        self.made = made  # every port bound so far (appended as each one is)
        self.first_seen: dict[str, dict[str, float]] = {r: {} for r in regions}
        self.current: dict[str, set[str]] = {r: set() for r in regions}
        self.errors: Counter[str] = Counter()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._poll, args=(r,), daemon=True, name=f"watch-{r}")
                         for r in regions]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _poll(self, region: str) -> None:
        """Mostly the shadows still awaited, asked for by id (a shadow has its
        port's id): a short list even when the region holds thousands, so the
        watcher neither loads the regions nor lags behind them; the whole list
        every ``FULL_LIST_SECONDS`` as a backstop."""
        last_full = -FULL_LIST_SECONDS
        while not self._stop.is_set():
            full = time.monotonic() - last_full >= FULL_LIST_SECONDS
            try:
                ids = self._list_all(region) if full else self._list_awaited(region)
            except Exception as err:  # noqa: BLE001 - keep watching; the count is reported
                self.errors[f"{region}: {str(err)[:120]}"] += 1
            else:
                now = time.monotonic()
                seen = self.first_seen[region]
                for port_id in ids:
                    seen.setdefault(port_id, now)
                if full:
                    last_full = now
                    self.current[region] = set(ids)
                else:
                    self.current[region] |= set(ids)
            self._stop.wait(self.interval)

    def _list_all(self, region: str) -> list[str]:
        return list_ids(self.neutrons(region), "ports", network_id=self.network_id, device_owner=SHADOW_OWNER)

    def _list_awaited(self, region: str) -> list[str]:
        awaited = sorted({p.id for p in list(self.made) if p.region != region} - self.first_seen[region].keys())
        found: list[str] = []
        for start in range(0, len(awaited), AWAITED_PER_LIST):
            found += list_ids(self.neutrons(region), "ports", id=awaited[start:start + AWAITED_PER_LIST],
                              device_owner=SHADOW_OWNER)
        return found

    def missing(self, expected: dict[str, set[str]]) -> dict[str, int]:
        return {region: len(want - self.current[region]) for region, want in expected.items()}


def expected_shadows(made: list[MadePort], regions: tuple[str, ...]) -> dict[str, set[str]]:
    """Every region holds a shadow of every port bound in another region."""
    return {region: {p.id for p in made if p.region != region} for region in regions}


def wait_converged(watcher: ShadowWatcher, expected: dict[str, set[str]], timeout: float) -> bool:
    deadline = last_note = time.monotonic()
    deadline += timeout
    while time.monotonic() < deadline:
        missing = watcher.missing(expected)
        if not any(missing.values()):
            return True
        if time.monotonic() - last_note > 10:
            last_note = time.monotonic()
            have = ", ".join(f"{r} {len(expected[r]) - n}/{len(expected[r])}" for r, n in missing.items())
            say(f"  shadows: {have}")
        time.sleep(0.5)
    return False


# ------------------------------------------------------------------------- job sampler
@dataclass
class JobTrace:
    runs_seen: set[datetime] = field(default_factory=set)  # distinct started_at: one per claim
    errors: Counter[str] = field(default_factory=Counter)
    max_failures: int = 0
    last: Any = None  # the newest Job row


class JobSampler:
    """Samples the Isthmus DB rows of the bench's job keys. One row per key is all
    the engine keeps (docs/jobs.md), so run starts are only visible while they
    happen: sampled often enough, distinct ``started_at`` values count them."""

    def __init__(self, store, keys: dict[str, tuple[str, str]], interval: float = 0.1) -> None:
        self.store, self.keys, self.interval = store, keys, interval
        self.traces = {name: JobTrace() for name in keys}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="jobs")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, key in self.keys.items():
                try:
                    job = self.store.find(*key)
                except Exception as err:  # noqa: BLE001 - a locked read is retried next tick
                    self.traces[name].errors[f"(sampler) {str(err)[:100]}"] += 1
                    continue
                if job is not None:
                    self._record(self.traces[name], job)
            self._stop.wait(self.interval)

    @staticmethod
    def _record(trace: JobTrace, job) -> None:
        trace.last = job
        if job.started_at is not None:
            trace.runs_seen.add(job.started_at)
        trace.max_failures = max(trace.max_failures, job.failures)
        if job.last_error:
            trace.errors[job.last_error[:160]] += 1


def job_store(layout: Layout):
    from isthmus.db import make_engine
    from isthmus.jobs import JobStore

    return JobStore(make_engine(layout.isthmus_db_url))


def wait_jobs_idle(store, keys: Iterable[tuple[str, str]], timeout: float) -> bool:
    """Until no job of these keys is pending or running (a rerun counts as pending)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = [store.find(*key) for key in keys]
        if all(j is None or (j.status.value in ("SUCCESS", "FAIL") and not j.rerun) for j in jobs):
            return True
        time.sleep(0.5)
    return False


def seconds_to_next_resync(store) -> float:
    """The job worker re-enqueues everything routed on a timer; a measuring window
    placed right after a tick sees no reconcile traffic of ours."""
    import sqlalchemy as sa

    from isthmus.db import read_tx
    from isthmus.jobs.schema import schedules

    with read_tx(store.engine) as conn:  # deferred: a plain connect would BEGIN IMMEDIATE (isthmus.db)
        due = conn.execute(sa.select(sa.func.min(schedules.c.next_run_at))).scalar()
    if due is None:
        return float("inf")
    if isinstance(due, str):
        due = datetime.fromisoformat(due)
    return (due.replace(tzinfo=UTC) - datetime.now(UTC)).total_seconds()


def count_runs(requests: list[Request], job_path: str) -> int:
    """Each network_sync run GETs its network at central once, each
    security_group_sync run lists the project's groups once: exact run counts."""
    return sum(1 for r in requests if r.agent.startswith(XJOB_AGENT) and r.method == "GET" and r.path == job_path)


def check_reports(neutrons: Neutrons, network_id: str, made: list[MadePort], wait: float = 30.0) -> list[str]:
    """Central must show each port bound where it was made, with the region's report
    (a report central could not take at once is retried in the background: allowed
    ``wait`` seconds)."""
    deadline = time.monotonic() + wait
    while True:
        wrong = _unreported(neutrons, network_id, made)
        if not wrong or time.monotonic() > deadline:
            return wrong
        time.sleep(1.0)


def _unreported(neutrons: Neutrons, network_id: str, made: list[MadePort]) -> list[str]:
    ports = call(neutrons(CENTRAL_REGION), "GET", "/ports", params={
        "network_id": network_id, "device_owner": VM_OWNER,
        "fields": ["id", "binding:host_id", "binding:profile", "status"]})["ports"]
    by_id = {p["id"]: p for p in ports}
    wrong = []
    for port in made:
        seen = by_id.get(port.id)
        if (seen is None or seen.get("binding:host_id") != compute_host(port.region)
                or (binding_report(seen) or {}).get("region") != port.region):
            wrong.append(f"{port.id} ({port.region}): {json.dumps(seen)[:200]}")
    return wrong


# ----------------------------------------------------------------------- fan-out
FAN_OUT_CALLS = (("ports", "GET /v2.0/ports?network_id=N"), ("networks", "GET /v2.0/networks"))


@dataclass
class FanOut:
    call_name: str
    central_ms: list[float]
    region_ms: list[float]  # the same list asked of the first region (baseline)
    by_region: dict[str, Counter[str]]  # region -> {"other": n, "xjob": n, "probe": n}

    @property
    def others(self) -> int:
        return sum(c["other"] for c in self.by_region.values())


def classify(requests: list[Request]) -> Counter[str]:
    """``xjob``: the job worker's reconcile traffic (a resync tick may land in the
    window); ``probe``: the sandbox's health checks; anything else could only come
    from central answering our list, i.e. a fan-out."""
    kinds: Counter[str] = Counter()
    for request in requests:
        if request.agent.startswith(XJOB_AGENT):
            kinds["xjob"] += 1
        elif request.path == "/" and request.agent.startswith("Python-urllib"):
            kinds["probe"] += 1
        else:
            kinds["other"] += 1
    return kinds


def timed_list(neutron, collection: str, params: dict) -> float:
    started = time.monotonic()
    call(neutron, "GET", f"/{collection}", params=params)
    return (time.monotonic() - started) * 1000


def measure_fan_out(layout: Layout, neutrons: Neutrons, store, keys: list[tuple[str, str]], network_id: str,
                    calls: int) -> list[FanOut]:
    logs = neutron_logs(layout)
    central, first = neutrons(CENTRAL_REGION), neutrons(layout.regions[0])
    results = []
    for collection, name in FAN_OUT_CALLS:
        params = {"network_id": network_id} if collection == "ports" else {}
        # Outside the window: warms the token and connection, and tells how long the window lasts.
        needed = calls * timed_list(central, collection, params) / 1000 + 3
        if seconds_to_next_resync(store) < needed:  # let the next tick's jobs come and go first
            time.sleep(max(0.0, seconds_to_next_resync(store)) + 1)
            wait_jobs_idle(store, keys, 120)
        before = marks(logs)
        central_ms = [timed_list(central, collection, params) for _ in range(calls)]
        time.sleep(1)  # gunicorn writes the access line after the response
        by_region = {r: classify(logs[r].since(before[r])) for r in layout.regions}
        region_ms = [timed_list(first, collection, params) for _ in range(calls)]
        results.append(FanOut(name, central_ms, region_ms, by_region))
    return results


# ------------------------------------------------------------------------- cleanup
def delete_all(neutron_of: Callable[[MadePort], Any], ports: list[MadePort], workers: int) -> list[str]:
    errors = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="delete") as pool:
        futures = [pool.submit(call, neutron_of(p), "DELETE", f"/ports/{p.id}", ok=(204, 404)) for p in ports]
        for future in as_completed(futures):
            try:
                future.result()
            except Exception as err:  # noqa: BLE001 - keep deleting the rest
                errors.append(str(err)[:200])
    return errors


def delete_network(neutron, network_id: str, timeout: float) -> bool:
    """Retries 409: central refuses while user ports remain, a region while the
    job worker is still removing copies."""
    deadline = time.monotonic() + timeout
    while True:
        resp = neutron.request(f"/networks/{network_id}", "DELETE", raise_exc=False)
        if resp.status_code in (204, 404):
            return True
        if resp.status_code != 409 or time.monotonic() > deadline:
            say(f"  delete network {network_id}: {resp.status_code} {resp.text[:200]}")
            return False
        time.sleep(2)


def region_leftovers(neutrons: Neutrons, regions: tuple[str, ...], network_id: str) -> dict[str, int]:
    """What the job worker has not removed yet (lists by network_id never copy)."""
    left = {}
    for region in regions:
        neutron = neutrons(region)
        count = len(list_ids(neutron, "ports", network_id=network_id))
        count += len(list_ids(neutron, "subnets", network_id=network_id))
        count += network_id in list_ids(neutron, "networks")
        left[region] = count
    return left


def member_rules(neutrons: Neutrons, regions: tuple[str, ...], groups: set[str]) -> dict[str, int]:
    """Remote members admitted per region: addresses in the Isthmus address groups
    of the groups (isthmus-members-<group>), plus any /32 member rule left by the
    previous release (one per remote address)."""
    counts = {}
    for region in regions:
        rules = call(neutrons(region), "GET", "/security-group-rules",
                     params={"fields": ["id", "description", "security_group_id"]})["security_group_rules"]
        counts[region] = sum(1 for r in rules if r["security_group_id"] in groups
                             and (r.get("description") or "").startswith(MEMBER_RULE_TAG))
        names = [f"isthmus-members-{g}" for g in sorted(groups)]
        if names:
            found = call(neutrons(region), "GET", "/address-groups", params={"name": names})["address_groups"]
            counts[region] += sum(len(a.get("addresses") or []) for a in found)
    return counts


def wait_until(check: Callable[[], dict[str, int]], timeout: float, what: str) -> dict[str, int]:
    deadline = last_note = time.monotonic()
    deadline += timeout
    left = check()
    while any(left.values()) and time.monotonic() < deadline:
        if time.monotonic() - last_note > 10:
            last_note = time.monotonic()
            say(f"  {what}: {left}")
        time.sleep(2)
        left = check()
    return left


@dataclass
class Created:
    """Everything to delete, filled as it is made."""

    central_ports: list[MadePort] = field(default_factory=list)
    regional_ports: list[MadePort] = field(default_factory=list)
    central_networks: list[str] = field(default_factory=list)
    central_subnets: list[str] = field(default_factory=list)
    regional_networks: dict[str, str] = field(default_factory=dict)  # region -> network
    groups: set[str] = field(default_factory=set)


def routings_left(store, created: Created) -> dict[str, int]:
    """Registry routings of the deleted objects still in the Isthmus DB. Shown,
    not failed on: they are the system's bookkeeping, not what the bench made."""
    from isthmus.registry.store import Registry

    registry = Registry(store.engine)  # the registry shares the Isthmus DB with the jobs
    ports = {p.id for p in created.central_ports}
    return {
        "network": sum(len(registry.routings_of(n, "network")) for n in created.central_networks),
        "subnet": sum(len(registry.routings_of(s, "subnet")) for s in created.central_subnets),
        # One page (2,000 rows) is enough for a bench-sized network.
        "port": sum(1 for r in registry.list_routings({"resource_type": "port"}) if r.top_id in ports),
    }


def cleanup(layout: Layout, neutrons: Neutrons, store, created: Created, workers: int, timeout: float) -> bool:
    say(f"cleanup: deleting {len(created.central_ports)} ports at central, "
        f"{len(created.regional_ports)} region-only ports")
    started = time.monotonic()
    errors = delete_all(lambda p: neutrons(CENTRAL_REGION), created.central_ports, workers)
    errors += delete_all(lambda p: neutrons(p.region), created.regional_ports, workers)
    say(f"  ports deleted in {time.monotonic() - started:.1f}s "
        f"({len(errors)} errors{': ' + errors[0] if errors else ''})")
    clean = not errors
    for network in created.central_networks:
        clean &= delete_network(neutrons(CENTRAL_REGION), network, timeout)
    for region, network in created.regional_networks.items():
        clean &= delete_network(neutrons(region), network, timeout)
    for network in created.central_networks:
        left = wait_until(lambda: region_leftovers(neutrons, layout.regions, network), timeout,  # noqa: B023 - polled within this iteration
                          f"copies of {network} left")
        clean &= not any(left.values())
    if created.groups:
        left = wait_until(lambda: member_rules(neutrons, layout.regions, created.groups), timeout,
                          "remote members left")
        clean &= not any(left.values())
    say(f"cleanup {'done' if clean else 'INCOMPLETE'} in {time.monotonic() - started:.1f}s; registry routings "
        f"of the deleted objects still recorded: {routings_left(store, created)}")
    return clean


# -------------------------------------------------------------------------- tables
def measure_floor(neutrons: Neutrons, regions: tuple[str, ...], created: Created,
                  expected: dict[str, set[str]], tag: str) -> float | None:
    """Seconds for every region to make as many ports as it needed shadows, each
    region by one bulk POST per 200 on its region-only network, all regions at
    once: the least any wiring could take on this machine now. Removed after."""
    def make(region: str) -> float:
        # Shadows as the worker makes them (plans.shadow_body), of ports that exist nowhere else.
        bodies = [{"network_id": created.regional_networks[region], "name": shadow_port_name(str(uuid.uuid4())),
                   "device_owner": SHADOW_OWNER, "device_id": f"{tag}-floor", "port_security_enabled": False,
                   "security_groups": []} for _ in expected[region]]
        started = time.monotonic()
        for start in range(0, len(bodies), FLOOR_CHUNK):
            made = call(neutrons(region), "POST", "/ports", body={"ports": bodies[start:start + FLOOR_CHUNK]})["ports"]
            created.regional_ports += [MadePort(p["id"], region, 0.0, 0.0, 0.0) for p in made]
        return time.monotonic() - started

    try:
        with ThreadPoolExecutor(max_workers=len(regions)) as pool:
            return max(pool.map(make, [r for r in regions if expected.get(r)]), default=0.0)
    except Exception as err:  # noqa: BLE001 - a floor that cannot be measured is said, not a crash
        say(f"floor not measured: {err}")
        return None


def wait_quiet(store, timeout: float) -> None:
    """Until no event job (port_sync, sg_member_sync) is due or running: one
    measurement's jobs do not load the next. Periodic full passes never stop
    coming, so they are not waited for."""
    from isthmus.jobs.models import JobFilter, JobStatus

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = 0
        for job_type in EVENT_JOBS:
            counts = store.counts(JobFilter(job_type=job_type))
            busy += counts.get(JobStatus.NEW, 0) + counts.get(JobStatus.RUNNING, 0)
        if not busy:
            return
        time.sleep(0.5)


def print_creation(base: Batch, central: Batch, sequential: tuple[Batch, Batch] | None = None) -> None:
    print(f"\n1. port create+bind (POST, then PUT binding:host_id), {central.label}")
    print(f"{'':40} {'ports':>6} {'ports/s':>8} {'x base':>7} {'POST p50':>9} {'PUT p50':>8} "
          f"{'p50 ms':>7} {'p95 ms':>7} {'central req/port':>17} {'errors':>7}")
    rows = [("region-only networks (baseline)", base, base), ("central network (local plugin)", central, base)]
    if sequential:
        own, shared = sequential
        rows += [("one client: region-only (baseline)", own, own), ("one client: central network", shared, own)]
    for name, batch, against in rows:
        if not batch.made:
            continue
        total = [(p.create_s + p.bind_s) * 1000 for p in batch.made]
        per_port = batch.central_requests / len(batch.made)
        print(f"{name:40} {len(batch.made):6d} {batch.rate:8.1f} "
              f"{against.rate / batch.rate if batch.rate else 0:7.2f} "
              f"{statistics.median([p.create_s * 1000 for p in batch.made]):8.0f}ms "
              f"{statistics.median([p.bind_s * 1000 for p in batch.made]):6.0f}ms {statistics.median(total):7.0f} "
              f"{pct(total, .95):7.0f} {per_port:17.1f} {len(batch.errors):7d}")
    print("   x base: time per port against its baseline (higher is slower); one client: latency, "
          "ports made one after another; the others: throughput of the thread pool")


@dataclass
class Convergence:
    converged: bool
    expected: dict[str, set[str]]
    tail_s: float  # last port bound -> last shadow first seen
    span_s: float  # first port bound -> last shadow first seen
    first_latency: list[float]  # per port: bound -> its first shadow seen anywhere
    all_latency: list[float]  # per port: bound -> its shadow seen in every other region
    missing: dict[str, int]


def convergence(made: list[MadePort], watcher: ShadowWatcher, regions: tuple[str, ...], converged: bool) -> Convergence:
    expected = expected_shadows(made, regions)
    seen = [watcher.first_seen[r][pid] for r, want in expected.items() for pid in want if pid in watcher.first_seen[r]]
    last_shadow = max(seen) if seen else float("nan")
    first_latency, all_latency = [], []
    for port in made:
        times = [watcher.first_seen[r].get(port.id) for r in regions if r != port.region]
        known = [t for t in times if t is not None]
        if times and len(known) == len(times):
            first_latency.append(min(known) - port.bound_at)
            all_latency.append(max(known) - port.bound_at)
    return Convergence(converged, expected, last_shadow - max(p.bound_at for p in made),
                       last_shadow - min(p.bound_at for p in made), first_latency, all_latency,
                       watcher.missing(expected))


@dataclass
class JobReport:
    name: str
    events: int
    runs_logged: int
    trace: JobTrace


def worker_requests(logs: dict[str, AccessLog], before: dict[str, int], regions: tuple[str, ...]) -> Counter[str]:
    """The job worker's requests to the regions, by the job that made them:
    port_sync (lookups by network and MAC, shadow creates and deletes) and
    sg_member_sync (address groups, the group's copy) run per event; full
    passes (network_sync, security_group_sync: first use, periodic resync)
    grow with the network but not with the events."""
    counts: Counter[str] = Counter()
    for region in regions:
        for request in logs[region].since(before[region]):
            if request.agent.startswith(XJOB_AGENT):
                counts[_cause(request)] += 1
    return counts


def _cause(request: Request) -> str:
    path = request.path
    if "mac_address=" in path or (request.method in ("POST", "DELETE") and path.startswith("/v2.0/ports")):
        return "port_sync"
    if path.startswith("/v2.0/address-groups") or re.match(r"^/v2\.0/security-groups/[^?/]+$", path):
        return "sg_member_sync"
    return "full passes"


def print_convergence(conv: Convergence, base: Batch, jobs: list[JobReport], fails: int, rules: dict[str, int],
                      poll: float, requests: Counter[str] | None = None, events: int = 0,
                      floor: float | None = None, unloaded: Convergence | None = None) -> None:
    shadows = sum(len(v) for v in conv.expected.values())
    rate = shadows / conv.span_s if conv.span_s > 0 else float("nan")
    print(f"\n2. job convergence ({'converged' if conv.converged else 'NOT CONVERGED'}; "
          f"shadows polled every {poll:g}s)")
    print("   shadows wanted per region: " + ", ".join(f"{r} {len(v)}" for r, v in conv.expected.items())
          + ("" if not any(conv.missing.values()) else f"; MISSING {conv.missing}"))
    print(f"{'':44} {'value':>10} {'x base':>7}")
    print(f"{'last port bound -> all shadows (s)':44} {conv.tail_s:10.1f}")
    print(f"{'first port bound -> all shadows (s)':44} {conv.span_s:10.1f}")
    if floor is not None:
        print(f"{'floor: the same shadows, one bulk POST/region':44} {floor:10.1f} "
              f"{conv.tail_s / floor if floor else 0:7.2f}  (x: last bound -> all shadows against it)")
    print(f"{'shadows/s (vs baseline region ports/s)':44} {rate:10.1f} {base.rate / rate if rate else 0:7.2f}")
    latencies = [("bound -> first shadow seen", conv.first_latency),
                 ("bound -> shadow in every other region", conv.all_latency)]
    if unloaded is not None:
        latencies.append(("one client: bound -> every other region" + ("" if unloaded.converged else " (NOT ALL)"),
                          unloaded.all_latency))
    for name, values in latencies:
        print(f"{name + ' p50/p95 (s)':44} {statistics.median(values) if values else float('nan'):5.1f}/"
              f"{pct(values, .95):<5.1f}")
    print("   x base: time per shadow against a baseline port create+bind (the worker makes a network's "
          "shadows one at a time per region, the baseline client had a thread pool)")
    print(f"\n{'job':22} {'events':>7} {'runs':>5} {'(sampled)':>9} {'events/run':>10} "
          f"{'max failures':>12} {'final':>8}  errors seen")
    for job in jobs:
        last = job.trace.last
        ratio = job.events / job.runs_logged if job.runs_logged else float("nan")
        errors = "; ".join(f"{n}x {e}" for e, n in job.trace.errors.most_common(3)) or "-"
        final = f"{last.status.value}" if last else "-"
        print(f"{job.name:22} {job.events:7d} {job.runs_logged:5d} {len(job.trace.runs_seen):9d} {ratio:10.1f} "
              f"{job.trace.max_failures:12d} {final:>8}  {errors}")
    print("   events: binding reports (each queues both jobs); runs: counted in central's access log "
          "(periodic resyncs included); sampled: run starts seen in the Isthmus DB")
    if requests is not None and events:
        per_port = (requests["port_sync"] + requests["sg_member_sync"]) / events
        print(f"   worker requests to the regions per bound port (port_sync + sg_member_sync): {per_port:.2f}")
        print("   worker requests to the regions per binding event: "
              + ", ".join(f"{kind} {n / events:.2f}" for kind, n in sorted(requests.items()))
              + f" ({events} events; port_sync and sg_member_sync per event must not grow with the ports)")
    print(f"   FAIL jobs in the Isthmus DB (all keys): {fails}; "
          "remote members admitted per region (address-group addresses): "
          f"{', '.join(f'{r} {n}' for r, n in rules.items())}")


def print_fan_out(results: list[FanOut], regions: tuple[str, ...], calls: int) -> None:
    print(f"\n3. regional Neutron requests while central answers {calls} list calls (want 0)")
    heads = " ".join(f"{r:>12}" for r in regions)
    print(f"{'central call':32} {'p50 ms':>7} {'x region':>8} {heads} {'(xjob)':>7}")
    for result in results:
        cells = " ".join(f"{result.by_region[r]['other']:12d}" for r in regions)
        xjob = sum(c["xjob"] for c in result.by_region.values())
        central, region = statistics.median(result.central_ms), statistics.median(result.region_ms)
        print(f"{result.call_name:32} {central:7.1f} {central / region:8.2f} {cells} {xjob:7d}")
    print(f"   x region: central's latency against the same list asked of {regions[0]}; (xjob): the job "
          "worker's own traffic in the window, not caused by the calls")


def server_errors(layout: Layout, start: dict[str, int]) -> list[str]:
    """5xx answers of any Neutron during the run: each is worth a look in its log."""
    found = []
    for region, log in neutron_logs(layout).items():
        for request in log.since(start[region]):
            if request.status >= 500:
                found.append(f"{region}: {request.method} {request.path[:90]} -> {request.status} "
                             f"({request.agent[:20]})")
    return found


def refused_shadow_creates(layout: Layout, start: dict[str, int]) -> dict[str, int]:
    """The worker's port creates a region refused (409: a shadow made meanwhile,
    by another run): each cost a read of the region to converge."""
    return {region: sum(1 for r in log.since(start[region])
                        if r.method == "POST" and r.path.startswith("/v2.0/ports") and r.status == 409
                        and r.agent.startswith(XJOB_AGENT))
            for region, log in neutron_logs(layout).items()}


# ---------------------------------------------------------------------------- main
def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, default=Path(".sandbox"))
    parser.add_argument("--ports", type=int, default=1000, help="VM ports on the central network")
    parser.add_argument("--baseline-ports", type=int, default=None,
                        help="ports on region-only networks (default: --ports, at most 300)")
    parser.add_argument("--workers", type=int, default=8, help="concurrent port creates")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for convergence, cleanup")
    parser.add_argument("--lists", type=int, default=20, help="central calls of each kind in the fan-out check")
    parser.add_argument("--poll", type=float, default=0.25, help="seconds between shadow polls of a region")
    parser.add_argument("--regions", type=int, default=None,
                        help="use the sandbox's first N regions (default: all of them)")
    parser.add_argument("--sequential", type=int, default=30,
                        help="ports made one at a time by one client, per kind (latency; 0: skip)")
    parser.add_argument("--no-security-groups", action="store_true",
                        help="ports without the default group (L2 and jobs only, no remote-member rules)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    layout = Layout.load(args.state_dir)
    if layout is None or layout.plain or len(layout.regions) < 2:
        raise SystemExit("needs a running sandbox with Isthmus networking and two regions or more")
    if args.ports < len(layout.regions):
        raise SystemExit(f"--ports: at least one per region ({len(layout.regions)})")
    regions = layout.regions[:args.regions] if args.regions else layout.regions
    if args.regions and (args.regions < 2 or args.regions > len(layout.regions)):
        raise SystemExit(f"--regions: 2 to {len(layout.regions)} (the sandbox's regions)")
    baseline_ports = args.baseline_ports or min(args.ports, 300)
    neutrons, store, logs = Neutrons(layout), job_store(layout), neutron_logs(layout)
    project = connect(layout, CENTRAL_REGION, "admin").current_project_id
    tag = f"bench-jobs-{uuid.uuid4().hex[:6]}"
    created = Created()
    run_start = marks(logs)
    fan_out: list[FanOut] = []
    try:
        say(f"{tag}: {args.ports} ports over {', '.join(regions)}, {args.workers} client threads, "
            f"{layout.xjob_workers} isthmus-xjob process(es) (sandbox up --xjob-workers)")
        for region in regions:
            # Room for the baseline's ports, the one-client ones and the floor's shadows.
            created.regional_networks[region], _ = make_network(neutrons(region), f"{tag}-own",
                                                                baseline_ports + args.sequential + args.ports)
        say(f"baseline: {baseline_ports} ports on region-only networks")
        before = marks(logs)
        base = make_ports(neutrons, round_robin(regions, baseline_ports, lambda r: created.regional_networks[r]),
                          args.workers, "baseline", tag, created.regional_ports, args.no_security_groups)
        base.central_requests = sum(1 for r in logs[CENTRAL_REGION].since(before[CENTRAL_REGION])
                                    if r.agent.startswith(LOCAL_AGENT))
        say(f"baseline: {base.rate:.1f} ports/s")

        network, subnet = make_network(neutrons(CENTRAL_REGION), tag, args.ports + 2 * args.sequential)
        created.central_networks.append(network)
        created.central_subnets.append(subnet)
        sequential: tuple[Batch, Batch] | None = None
        unloaded: Convergence | None = None
        if args.sequential:
            say(f"one client: {args.sequential} ports of each kind, one at a time")
            sequential = (
                make_ports(neutrons, round_robin(regions, args.sequential, lambda r: created.regional_networks[r]),
                           1, "one client, region-only", tag, created.regional_ports, args.no_security_groups),
                make_ports(neutrons, round_robin(regions, args.sequential, lambda _: network), 1,
                           "one client, central", tag, created.central_ports, args.no_security_groups))
            wait_quiet(store, 120)
            # The same clock as the burst below with no queue in front of the
            # worker: what the wiring itself takes from a bind to the shadows. Its
            # own ports: the watcher's polls would slow the timed ones above.
            count = min(args.sequential, UNLOADED_PORTS)
            say(f"one client, watched: {count} ports one at a time, bound -> shadows")
            # It watches every central port, as the burst's does: the timed ones'
            # shadows are there already and are found on its first poll.
            watcher = ShadowWatcher(neutrons, regions, network, args.poll, created.central_ports)
            watcher.start()
            watched = make_ports(neutrons, round_robin(regions, count, lambda _: network), 1, "one client, watched",
                                 tag, created.central_ports, args.no_security_groups)
            unloaded_ok = wait_converged(watcher, expected_shadows(watched.made, regions), args.timeout)
            watcher.stop()
            unloaded = convergence(watched.made, watcher, regions, unloaded_ok)
            wait_quiet(store, 120)
        jobs = {"network_sync": ("network_sync", network), "security_group_sync": ("security_group_sync", project)}
        watcher = ShadowWatcher(neutrons, regions, network, args.poll, created.central_ports)
        sampler = JobSampler(store, jobs)
        watcher.start()
        sampler.start()
        say(f"central network {network}: creating {args.ports} ports")
        before = marks(logs)
        made = make_ports(neutrons, round_robin(regions, args.ports, lambda _: network), args.workers,
                          f"{args.ports} ports, {len(regions)} regions", tag, created.central_ports,
                          args.no_security_groups)
        made.central_requests = sum(1 for r in logs[CENTRAL_REGION].since(before[CENTRAL_REGION])
                                    if r.agent.startswith(LOCAL_AGENT))
        say(f"ports made: {made.rate:.1f} ports/s; waiting for shadows")
        wrong = check_reports(neutrons, network, made.made)
        if wrong:
            say(f"NOT REPORTED to central: {len(wrong)} ports, e.g. {wrong[0]}")
        expected = expected_shadows(made.made, regions)
        converged = wait_converged(watcher, expected, args.timeout)
        say(f"shadows {'converged' if converged else 'did NOT converge'}; waiting for the jobs to finish")
        wait_jobs_idle(store, jobs.values(), args.timeout)
        watcher.stop()
        sampler.stop()
        conv = convergence(made.made, watcher, regions, converged)
        central_requests = logs[CENTRAL_REGION].since(before[CENTRAL_REGION])
        by_cause = worker_requests(logs, before, regions)
        job_reports = [
            JobReport("network_sync", len(made.made), count_runs(central_requests, f"/v2.0/networks/{network}"),
                      sampler.traces["network_sync"]),
            JobReport("security_group_sync", len(made.made),
                      count_runs(central_requests, f"/v2.0/security-groups?project_id={project}"),
                      sampler.traces["security_group_sync"]),
        ]
        from isthmus.jobs.models import JobFilter, JobStatus

        fails = store.counts(JobFilter()).get(JobStatus.FAIL, 0)
        created.groups = {g for p in call(neutrons(CENTRAL_REGION), "GET", "/ports", params={
            "network_id": network, "device_owner": VM_OWNER, "fields": ["security_groups"]})["ports"]
            for g in p["security_groups"]}
        rules = member_rules(neutrons, regions, created.groups)

        say("floor: the same shadows made by one bulk create per region, on region-only networks")
        floor = measure_floor(neutrons, regions, created, conv.expected, tag)

        say(f"fan-out: {args.lists} central calls of each kind")
        fan_out = measure_fan_out(layout, neutrons, store, list(jobs.values()), network, args.lists)

        print_creation(base, made, sequential)
        print_convergence(conv, base, job_reports, fails, rules, args.poll, by_cause, len(made.made), floor,
                          unloaded)
        print_fan_out(fan_out, regions, args.lists)
        for name, batch in (("baseline", base), ("central", made)):
            for error in batch.errors[:3]:
                print(f"   {name} create error: {error}")
        if watcher.errors:
            print(f"   shadow poll errors: {dict(watcher.errors.most_common(3))}")
        if wrong:
            print(f"   ports central shows unbound or bound elsewhere: {len(wrong)}")
        errors = server_errors(layout, run_start)
        print(f"   5xx answers from any Neutron during the run: {len(errors)}; requests sent again after a "
              f"connection failed before any answer: {dict(connect_retries_made) or 0}")
        for error in errors[:10]:
            print(f"     {error}")
        refused = refused_shadow_creates(layout, run_start)
        print(f"   shadow creates a region refused as made already (409, then read): {sum(refused.values())} "
              f"({', '.join(f'{r} {n}' for r, n in refused.items() if n) or 'none'})")
    finally:
        clean = cleanup(layout, neutrons, store, created, args.workers, args.timeout)
    fan_out_ok = bool(fan_out) and all(r.others == 0 for r in fan_out)
    if not fan_out_ok:
        print("FAN-OUT: central list calls reached the regions", file=sys.stderr)
    return 0 if fan_out_ok and clean and conv.converged and not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
