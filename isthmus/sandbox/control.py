"""``isthmus sandbox up|down|status|logs``."""

from __future__ import annotations

import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from isthmus.sandbox import clouds, dag, database, plan, process, rabbitmq
from isthmus.sandbox.layout import STATE_FILE, Layout
from isthmus.sandbox.schema_cache import SchemaCache


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    pid: int
    running: bool
    healthy: bool
    where: str
    log: str


def status(layout: Layout) -> list[ServiceStatus]:
    rows = []
    for record in process.ServiceRecord.load_all(layout.run):
        running = process.pid_alive(record.pid)
        if record.url:
            healthy = running and process.http_ok(record.url, ca=record.ca)
        elif record.port:
            healthy = running and process.port_is_listening(record.port)
        else:
            healthy = running
        rows.append(ServiceStatus(record.name, record.pid, running, healthy,
                                  record.url or (f"127.0.0.1:{record.port}" if record.port else "-"), record.log))
    return rows


def is_running(layout: Layout) -> bool:
    return any(process.pid_alive(r.pid) for r in process.ServiceRecord.load_all(layout.run))


def print_table(rows: list[ServiceStatus], out: TextIO) -> None:
    table = [("SERVICE", "STATE", "URL", "LOG")]
    for row in rows:
        state = "healthy" if row.healthy else ("running, not answering" if row.running else "stopped")
        table.append((row.name, state, row.where, row.log))
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[3], file=out)


def _fresh_state_dir(state_dir: Path) -> None:
    """Start from nothing; only ever wipe a directory that holds a sandbox of ours."""
    if state_dir.exists() and any(state_dir.iterdir()):
        if not (state_dir / STATE_FILE).exists():
            raise process.SandboxError(f"--state-dir {state_dir} is not empty and holds no sandbox; choose another")
        shutil.rmtree(state_dir)


def up(layout: Layout, out: TextIO = sys.stdout, schema_cache: bool = True) -> int:
    """Start the sandbox; ``schema_cache`` False migrates every schema (the cache is
    neither read nor written)."""
    existing = Layout.load(layout.state_dir)
    if existing and is_running(existing):
        print(f"A sandbox is already running in {existing.state_dir}:", file=out)
        print_table(status(existing), out)
        return 0
    if layout.dataplane:
        from isthmus.sandbox.dataplane import host as dataplane

        dataplane.check_machine()
    if layout.ovn_regions:
        from isthmus.sandbox import ovn

        ovn.check_root(lambda line: print(line, file=out, flush=True))
    busy = [(name, port) for name, port in plan.planned_ports(layout) if not process.port_is_free(port)]
    if busy:
        name, port = busy[0]
        raise process.SandboxError(
            f"port {port} (for {name}) is already in use; pick another --base-port"
            + (f" ({len(busy)} ports busy)" if len(busy) > 1 else ""))
    _fresh_state_dir(layout.state_dir)
    layout.make_dirs()
    layout.save()
    progress = dag.Progress(out)
    regions = ", ".join(layout.regions)
    progress.say(f"sandbox in {layout.state_dir}: CentralRegion + {regions}, ports from {layout.base_port}"
                 + ("" if layout.compute else " (no compute)"))
    cache = SchemaCache.open(enabled=schema_cache)
    try:
        dag.run_steps(plan.steps(layout, cache), progress)
    except Exception as err:
        progress.say(f"error: {err}")
        progress.say("stopping what was started")
        down(layout, out=open("/dev/null", "w"))
        raise process.SandboxError(str(err).splitlines()[0]) from err
    clouds.write(layout)
    if cache.summary():
        progress.say(cache.summary())
    progress.say("sandbox is up")
    print(file=out)
    print_table(status(layout), out)
    print(f"\nclouds.yaml: {layout.clouds_yaml}", file=out)
    print(f"  export OS_CLIENT_CONFIG_FILE={layout.clouds_yaml}", file=out)
    print(f"  openstack --os-cloud isthmus-admin --os-region-name {layout.regions[0]} server list", file=out)
    print_metrics(layout, out)
    return 0


def print_metrics(layout: Layout, out: TextIO) -> None:
    """Where Prometheus scrapes the sandbox's Isthmus services (docs/metrics.md)."""
    running = {r.name for r in process.ServiceRecord.load_all(layout.run)}
    urls = {name: url for name, url in layout.metrics_urls().items() if name in running}
    if urls:
        print("\nmetrics (Prometheus):", file=out)
        for name, url in urls.items():
            print(f"  {name}: {url}", file=out)


def down(layout: Layout, out: TextIO = sys.stdout) -> int:
    records = process.ServiceRecord.load_all(layout.run)
    # Databases last: services flush to them while stopping.
    first = [r for r in records if r.name != "mariadb"]
    last = [r for r in records if r.name == "mariadb"]
    started = time.monotonic()
    for group in (first, last):
        with ThreadPoolExecutor(max_workers=max(1, len(group))) as pool:
            list(pool.map(process.stop, group))
    for record in records:
        (layout.run / f"{record.name}.json").unlink(missing_ok=True)
    if layout.compute:
        rabbitmq.delete_vhosts(layout)
    if layout.uses_mariadb:
        database.drop_databases(layout)
    if layout.dataplane:
        from isthmus.sandbox.dataplane import host as dataplane

        removed = dataplane.remove(layout)
        print(f"removed {len(removed)} network namespaces (their links and bridges with them)", file=out)
    left = [(n, p) for n, p in plan.planned_ports(layout) if process.port_is_listening(p)]
    print(f"stopped {len(records)} processes in {time.monotonic() - started:.1f}s", file=out)
    if left:
        print("still listening: " + ", ".join(f"{n} on {p}" for n, p in left), file=out)
        return 1
    return 0


def logs(layout: Layout, service: str, lines: int, follow: bool, out: TextIO = sys.stdout) -> int:
    candidates = sorted(layout.logs.glob(f"{service}*.log"))
    exact = [p for p in candidates if p.stem == service]
    paths = exact or candidates
    if not paths:
        known = sorted({p.stem for p in layout.logs.glob("*.log")})
        raise process.SandboxError(f"no log for {service!r}; known: {', '.join(known)}")
    path = paths[0]
    text = path.read_text(errors="replace").splitlines()
    for line in text[-lines:] if lines else text:
        print(line, file=out)
    if follow:
        with open(path, errors="replace") as handle:
            handle.seek(0, 2)
            try:
                while True:
                    line = handle.readline()
                    if line:
                        out.write(line)
                        out.flush()
                    else:
                        time.sleep(0.3)
            except KeyboardInterrupt:
                return 0
    return 0


def stop_service(layout: Layout, name: str, out: TextIO = sys.stdout) -> int:
    """Stop one service (e.g. to see a region's Neutron go down); ``restart`` brings it back."""
    record = next((r for r in process.ServiceRecord.load_all(layout.run) if r.name == name), None)
    if record is None:
        known = ", ".join(r.name for r in process.ServiceRecord.load_all(layout.run))
        raise process.SandboxError(f"no service {name!r}; known: {known}")
    process.stop(record)
    print(f"stopped {name} (pid {record.pid})", file=out)
    return 0


def restart_service(layout: Layout, name: str, out: TextIO = sys.stdout) -> int:
    start = plan.starter(layout, name)
    record = next((r for r in process.ServiceRecord.load_all(layout.run) if r.name == name), None)
    if record is not None and process.pid_alive(record.pid):
        process.stop(record)
    started = time.monotonic()
    start()
    print(f"restarted {name} in {time.monotonic() - started:.1f}s", file=out)
    return 0
