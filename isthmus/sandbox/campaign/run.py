"""A seeded fault campaign on a running sandbox, and its JSON report.

Each cycle: the load runs; one fault (or a pair) is injected and held; it is
lifted; the load stops; the invariants are checked every few seconds until they
hold (time to converge) or ``converge_timeout`` passes (violations reported).
Requests that failed in regions no fault touched are counted against it.
"""

from __future__ import annotations

import json
import logging
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from openstack import exceptions as openstack_exceptions

from isthmus.polling import retry
from isthmus.sandbox.campaign import faults as fault_kinds
from isthmus.sandbox.campaign import invariants
from isthmus.sandbox.campaign.load import CENTRAL, Ledger, Load
from isthmus.sandbox.layout import Layout

LOG = logging.getLogger(__name__)
SERVICES = ("isthmus-xjob", "isthmus-admin", "isthmus-gateway", f"neutron-{CENTRAL}", "neutron-{region}",
            "nova-api-{region}")
KINDS = ("kill", "freeze", "rabbitmq", "cut_off", "restore", "isthmus_db", "mariadb")


@dataclass
class Outcome:
    faults: list[str]
    held_seconds: float
    converge_seconds: float | None  # None: did not converge within the timeout
    violations: list[str]
    unfaulted_failures: list[str]
    lift_errors: list[str] = field(default_factory=list)


@dataclass
class Settings:
    seed: int = 1
    count: int = 10
    minutes: float = 60.0
    kinds: tuple[str, ...] = KINDS
    pairs: float = 0.25  # share of cycles that inject two faults at once
    hold: float = 20.0
    warmup: float = 10.0
    converge_timeout: float = 240.0
    check_every: float = 5.0


def fault_names(layout: Layout, kinds: tuple[str, ...]) -> list[str]:
    """Every fault of the given kinds this sandbox can have ("kind:target")."""
    services = [s.format(region=r) for s in SERVICES for r in (layout.regions if "{region}" in s else ("",))]
    names = []
    for kind in kinds:
        if kind in ("kill", "freeze"):
            names += [f"{kind}:{s}" for s in services]
        elif kind in ("cut_off", "restore"):
            names += [f"{kind}:{r}" for r in layout.regions]
        elif kind == "mariadb":
            names.append("kill:mariadb")
        else:
            names.append(f"{kind}:{'stop_app' if kind == 'rabbitmq' else 'locked'}")
    return names


def plan(names: list[str], settings: Settings) -> list[list[str]]:
    """``count`` cycles, seeded: every fault at least once before any repeats
    (as far as ``count`` allows); some cycles pair two faults of different targets.
    A pair's second fault is one of the kinds used least so far: kinds with one
    fault (RabbitMQ, MariaDB, the Isthmus DB) come up as often as those with many."""
    rng = random.Random(settings.seed)
    order: list[str] = []
    while len(order) < settings.count:
        batch = list(names)
        rng.shuffle(batch)
        order += batch
    used: dict[str, int] = {_kind(n): 0 for n in names}
    cycles = []
    for name in order[:settings.count]:
        cycle = [name]
        used[_kind(name)] += 1
        if rng.random() < settings.pairs:
            others = [n for n in names if n.split(":", 1)[1] != name.split(":", 1)[1] and "restore" not in n
                      and "restore" not in name]
            if others:
                fewest = min(used[_kind(n)] for n in others)
                partner = rng.choice([n for n in others if used[_kind(n)] == fewest])
                used[_kind(partner)] += 1
                cycle.append(partner)
        cycles.append(cycle)
    return cycles


def _kind(name: str) -> str:
    """The report's kind of a fault name (``kill:mariadb`` is MariaDB's)."""
    return "mariadb" if name == "kill:mariadb" else name.split(":", 1)[0]


def build(layout: Layout, name: str, backup: Path) -> fault_kinds.Fault:
    kind, target = name.split(":", 1)
    if kind == "kill":
        return fault_kinds.kill(layout, target)
    if kind == "freeze":
        return fault_kinds.freeze(layout, target)
    if kind == "cut_off":
        return fault_kinds.region_cut_off(layout, target)
    if kind == "restore":
        return fault_kinds.neutron_restored(layout, target, backup)
    if kind == "rabbitmq":
        return fault_kinds.rabbitmq_stopped()
    if kind == "isthmus_db":
        return fault_kinds.isthmus_db_locked(layout)
    raise ValueError(f"unknown fault {name}")


class Campaign:
    def __init__(self, layout: Layout, settings: Settings, connect: Callable[[str, str], Any],
                 out: TextIO) -> None:
        self.layout = layout
        self.settings = settings
        self.connect = connect  # (region, cloud) -> openstack Connection
        self.out = out
        self.started = datetime.now(UTC)
        self.ledger = Ledger()
        self.outcomes: list[Outcome] = []  # so far (an interrupted campaign still reports them)
        self.cleanup_problems: list[str] = []  # reported, never a lost report

    def say(self, text: str) -> None:
        print(f"[faults {time.strftime('%H:%M:%S')}] {text}", file=self.out, flush=True)

    @contextmanager
    def network(self) -> Iterator[tuple[Any, Any]]:
        central = self.connect(CENTRAL, "isthmus-demo")
        name = f"faults-{uuid.uuid4().hex[:6]}"
        net = central.network.create_network(name=name)
        central.network.create_subnet(network_id=net.id, ip_version=4, cidr="10.66.0.0/22", name=name)
        group = central.network.create_security_group(name=name)
        try:
            yield net, group
        finally:
            try:
                self._clean_up(net, group)
            except Exception as err:  # noqa: BLE001 - the cycles' results outlive a failed clean-up
                self.cleanup_problems.append(f"{type(err).__name__}: {err}")
                self.say(f"clean-up incomplete (the results stand): {err}")

    def _clean_up(self, net: Any, group: Any) -> None:
        for region in self.layout.regions:
            conn = self.connect(region, "isthmus-demo")
            for server in list(conn.compute.servers(name=net.name)):
                conn.compute.delete_server(server)
            for server in list(conn.compute.servers(name=net.name)):
                try:
                    conn.compute.wait_for_delete(server, wait=180)
                except openstack_exceptions.ResourceTimeout:
                    # Nova answered 204 to a delete whose cast to nova-compute was lost
                    # while RabbitMQ was stopped: the server stays "deleting" until
                    # nova-compute restarts. Reset it (admin) and delete again.
                    admin = self.connect(region, "isthmus-admin")
                    admin.compute.reset_server_state(server, "error")
                    admin.compute.delete_server(server)
                    admin.compute.wait_for_delete(server, wait=180)
        central = self.connect(CENTRAL, "isthmus-demo")

        def clean() -> None:
            for port in central.network.ports(network_id=net.id):
                if not (port.device_owner or "").startswith("network:"):
                    central.network.delete_port(port, ignore_missing=True)
            central.network.delete_network(net, ignore_missing=True)
            central.network.delete_security_group(group, ignore_missing=True)

        try:
            retry(clean, 120, "campaign clean-up", interval=3)  # ports still being deleted: again
        except TimeoutError as err:
            LOG.warning("%s", err)

    def run(self, cycles: list[list[str]] | None = None) -> list[Outcome]:
        """The seeded plan's cycles, or the ones given (a test's fixed campaign)."""
        names = fault_names(self.layout, self.settings.kinds)
        cycles = cycles if cycles is not None else plan(names, self.settings)
        self.say(f"{len(cycles)} cycles over {len(names)} faults (seed {self.settings.seed})")
        outcomes = self.outcomes
        ends = time.monotonic() + self.settings.minutes * 60
        with self.network() as (net, group), tempfile.TemporaryDirectory() as scratch:
            load = Load(lambda region: self.connect(region, "isthmus-demo"), self.layout.regions, net, group,
                        self.ledger, self.settings.seed)
            for number, cycle in enumerate(cycles, 1):
                if time.monotonic() > ends:
                    self.say(f"time is up after {number - 1} cycles")
                    break
                outcome = self.cycle(cycle, load, net, Path(scratch) / f"backup-{number}.sqlite")
                outcomes.append(outcome)
                seconds = outcome.converge_seconds
                state = f"converged in {seconds:.0f}s" if seconds is not None else "DID NOT CONVERGE"
                self.say(f"{number}/{len(cycles)} {' + '.join(cycle)}: {state}; "
                         f"{len(outcome.violations)} violations, {len(outcome.unfaulted_failures)} failed requests "
                         f"elsewhere")
        return outcomes

    def cycle(self, cycle: list[str], load: Load, net: Any, backup: Path) -> Outcome:
        for name in cycle:
            if name.startswith("restore:"):
                fault_kinds.backup_neutron(self.layout, name.split(":", 1)[1], backup)
        load.start()
        time.sleep(self.settings.warmup)
        injected: list[fault_kinds.Fault] = []
        started = time.monotonic()
        lift_errors: list[str] = []
        try:
            for name in cycle:
                fault = build(self.layout, name, backup)
                self.say(f"inject {fault.name}")
                try:
                    fault.inject()
                except Exception as err:  # noqa: BLE001 - the campaign goes on; the report says it
                    lift_errors.append(f"{fault.name}: could not inject: {err}")
                    self.say(f"could not inject {fault.name}: {err}")
                    continue
                injected.append(fault)
            time.sleep(self.settings.hold)
        finally:
            lift_errors += fault_kinds.lift_all_safely(injected)
            lifted = time.monotonic()
            try:
                fault_kinds.wait_healthy(self.layout)
            except TimeoutError as err:
                lift_errors.append(str(err))
            load.stop()
        faulted = frozenset().union(*(f.faulted for f in injected)) if injected else frozenset()
        failures = [f"{r.region} {r.kind}: {r.error}" for r in self.ledger.failures(started, lifted, faulted)]
        converge, violations = self.converge(net, lifted)
        return Outcome(cycle, round(lifted - started, 1), converge, violations, failures, lift_errors)

    def converge(self, net: Any, lifted: float) -> tuple[float | None, list[str]]:
        deadline = lifted + self.settings.converge_timeout
        next_word = lifted + 30
        violations: list[str] = []
        while True:
            try:
                with self.ledger.lock:
                    servers, ports = dict(self.ledger.servers), set(self.ledger.ports)
                violations = invariants.check(self.snapshot(net), servers, ports)
            except Exception as err:  # noqa: BLE001 - a read that failed is no verdict: look again
                violations = [f"could not read: {type(err).__name__}: {err}"]
            if not violations:
                return round(time.monotonic() - lifted, 1), []
            if time.monotonic() > deadline:
                return None, violations
            if time.monotonic() >= next_word:  # a long wait says what it waits for
                self.say(f"  waiting: {len(violations)} invariants broken, e.g. {violations[0]}")
                next_word = time.monotonic() + 30
            time.sleep(self.settings.check_every)

    def snapshot(self, net: Any) -> invariants.Snapshot:
        def ports(region: str) -> list[dict[str, Any]]:
            conn = self.connect(region, "isthmus-admin")
            return [p.to_dict(computed=False) for p in conn.network.ports(network_id=net.id)]

        def as_neutron(port: dict[str, Any]) -> dict[str, Any]:
            # openstacksdk's names back to Neutron's (the checks read Neutron's)
            return {**port, "binding:host_id": port.get("binding_host_id"),
                    "binding:profile": port.get("binding_profile") or {}}

        central = {p["id"]: as_neutron(p) for p in ports(CENTRAL)}
        regional = {r: [as_neutron(p) for p in ports(r)] for r in self.layout.regions}
        servers = {}
        for region in self.layout.regions:
            conn = self.connect(region, "isthmus-demo")
            servers[region] = {s.id: s.status for s in conn.compute.servers(name=net.name)}
        failed, overdue = self.jobs()
        return invariants.Snapshot(central, regional, servers, failed, overdue)

    def jobs(self) -> tuple[list[str], list[str]]:
        from isthmus.db import make_engine
        from isthmus.jobs import JobFilter, JobStatus, JobStore

        store = JobStore(make_engine(self.layout.isthmus_db_url))
        since = self.started.replace(tzinfo=None)
        failed = [f"{j.job_type} {j.resource_id}: {(j.last_error or '')[:200]}"
                  for j in store.list(JobFilter(status=JobStatus.FAIL), limit=200)
                  if j.updated_at.replace(tzinfo=None) >= since]
        due = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=3)
        overdue = [f"{j.job_type} {j.resource_id}" for j in store.list(JobFilter(status=JobStatus.NEW), limit=1000)
                   if j.run_after.replace(tzinfo=None) < due]
        return failed, overdue


def summary(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Per fault kind: count, time to converge p50/max, violations, failed requests elsewhere."""
    rows: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        for name in outcome.faults:
            rows.setdefault(_kind(name), []).append(outcome)
    table = []
    for kind, items in sorted(rows.items()):
        times = [o.converge_seconds for o in items if o.converge_seconds is not None]
        table.append({"kind": kind, "count": len(items),
                      "converge_p50": round(statistics.median(times), 1) if times else None,
                      "converge_max": max(times) if times else None,
                      "not_converged": sum(1 for o in items if o.converge_seconds is None),
                      "violations": sum(len(o.violations) for o in items),
                      "failed_elsewhere": sum(len(o.unfaulted_failures) for o in items)})
    return table


def report(outcomes: list[Outcome], settings: Settings, ledger: Ledger | None = None) -> dict[str, Any]:
    data = {"settings": asdict(settings), "cycles": [asdict(o) for o in outcomes], "summary": summary(outcomes),
            "violations": sum(len(o.violations) for o in outcomes),
            "failed_elsewhere": sum(len(o.unfaulted_failures) for o in outcomes)}
    if ledger is not None:  # how much user work the faults met
        with ledger.lock:
            requests = list(ledger.requests)
        data["load"] = {region: {"requests": sum(1 for r in requests if r.region == region),
                                 "failed": sum(1 for r in requests if r.region == region and not r.ok)}
                        for region in sorted({r.region for r in requests})}
    return data


def print_table(table: list[dict[str, Any]], out: TextIO) -> None:
    print(f"{'fault kind':<12} {'count':>5} {'p50 s':>7} {'max s':>7} {'stuck':>5} {'violations':>10} "
          f"{'failed elsewhere':>16}", file=out)
    for row in table:
        print(f"{row['kind']:<12} {row['count']:>5} {str(row['converge_p50']):>7} {str(row['converge_max']):>7} "
              f"{row['not_converged']:>5} {row['violations']:>10} {row['failed_elsewhere']:>16}", file=out)


def write_report(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, default=str))
