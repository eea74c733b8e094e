"""The faults a campaign injects into a sandbox, each with its undo.

A fault names the region it takes away (``faulted``): requests there may fail
while it lasts; requests anywhere else must not.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from isthmus.polling import poll
from isthmus.sandbox import control, process
from isthmus.sandbox.layout import CENTRAL_REGION, Layout

CENTRAL = CENTRAL_REGION
NFT_TABLE = "isthmus_campaign"


@dataclass
class Fault:
    kind: str
    target: str
    faulted: frozenset[str]  # regions whose requests may fail meanwhile ("*": all of them)
    inject: Callable[[], None] = field(repr=False)
    lift: Callable[[], None] = field(repr=False)

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.target}"


def _record(layout: Layout, service: str) -> process.ServiceRecord:
    for record in process.ServiceRecord.load_all(layout.run):
        if record.name == service:
            return record
    raise LookupError(f"no service {service} in {layout.state_dir}")


def _quiet_restart(layout: Layout, service: str) -> None:
    with open(os.devnull, "w") as out:
        control.restart_service(layout, service, out=out)


def _region_of(service: str) -> str:
    """The region a service's outage takes away: its own; every region for the ones
    all regions share (the gateway fronts them all; MariaDB holds every Nova and
    Cinder database); none for the worker and the Admin API."""
    for suffix in ("RegionOne", "RegionTwo", "RegionThree", CENTRAL):
        if service.endswith(suffix):
            return suffix
    return "*" if service in ("isthmus-gateway", "mariadb") else ""


def kill(layout: Layout, service: str) -> Fault:
    """SIGKILL of the service's process group; lifted by starting it again."""
    region = _region_of(service)
    return Fault("kill", service, frozenset({region} if region else ()),
                 inject=lambda: os.killpg(_record(layout, service).pid, signal.SIGKILL),
                 lift=lambda: _quiet_restart(layout, service))


def freeze(layout: Layout, service: str) -> Fault:
    """SIGSTOP: the service accepts connections and answers nothing; SIGCONT lifts it."""
    region = _region_of(service)
    pid: list[int] = []

    def inject() -> None:
        pid[:] = [_record(layout, service).pid]
        os.killpg(pid[0], signal.SIGSTOP)

    return Fault("freeze", service, frozenset({region} if region else ()), inject=inject,
                 lift=lambda: os.killpg(pid[0], signal.SIGCONT))


def rabbitmq_stopped() -> Fault:
    """The machine's RabbitMQ application stopped (the node stays): every region's
    RPC (Nova to its computes, Neutron to its agents) waits."""
    def ctl(action: str) -> None:
        subprocess.run(["rabbitmqctl", "-q", action], check=True, capture_output=True, timeout=120)

    return Fault("rabbitmq", "stop_app", frozenset({"*"}), inject=lambda: ctl("stop_app"),
                 lift=lambda: ctl("start_app"))


def region_cut_off(layout: Layout, region: str) -> Fault:
    """Packets to the region's Neutron and Nova API dropped (nftables): from central,
    the worker and the gateway, the region is black-holed, not refused."""
    ports = sorted({layout.region_port(region, "neutron"), layout.region_port(region, "nova")})

    def nft(script: str) -> None:
        subprocess.run(["nft", "-f", "-"], input=script, text=True, check=True, capture_output=True, timeout=30)

    def inject() -> None:
        nft(f"table inet {NFT_TABLE} {{\n chain out {{\n  type filter hook output priority 0;\n"
            f"  ip daddr 127.0.0.1 tcp dport {{ {', '.join(map(str, ports))} }} drop\n }}\n}}\n")

    def lift() -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            nft(f"delete table inet {NFT_TABLE}")

    return Fault("cut_off", region, frozenset({region}), inject=inject, lift=lift)


def neutron_restored(layout: Layout, region: str, backup: Path) -> Fault:
    """The region's Neutron database put back to ``backup`` (taken minutes earlier):
    neutron-server stopped, the file restored, started again."""
    database = layout.sqlite_path(f"neutron-{region}")
    service = f"neutron-{region}"

    def inject() -> None:
        control.stop_service(layout, service, out=open(os.devnull, "w"))
        for suffix in ("-wal", "-shm"):
            database.with_name(database.name + suffix).unlink(missing_ok=True)
        shutil.copyfile(backup, database)
        _quiet_restart(layout, service)

    return Fault("restore", region, frozenset({region}), inject=inject, lift=lambda: None)


def backup_neutron(layout: Layout, region: str, target: Path) -> None:
    """A consistent copy of the region's Neutron database while it runs (SQLite's backup API)."""
    with sqlite3.connect(layout.sqlite_path(f"neutron-{region}")) as live, sqlite3.connect(target) as copy:
        live.backup(copy)


def isthmus_db_locked(layout: Layout) -> Fault:
    """The Isthmus database unavailable to writers (an exclusive lock held): central's
    deletes cannot record their tombstones, the worker cannot claim jobs."""
    holder: dict[str, object] = {}

    def inject() -> None:
        ready = threading.Event()
        release = threading.Event()

        def hold() -> None:
            conn = sqlite3.connect(layout.sqlite_path("isthmus"), timeout=30, isolation_level=None)
            try:
                conn.execute("BEGIN EXCLUSIVE")
                ready.set()
                release.wait()
                conn.execute("ROLLBACK")
            finally:
                conn.close()

        thread = threading.Thread(target=hold, name="campaign-db-lock", daemon=True)
        thread.start()
        if not ready.wait(30):
            raise RuntimeError("could not lock the Isthmus database within 30 s")
        holder.update(thread=thread, release=release)

    def lift() -> None:
        release = holder.get("release")
        if isinstance(release, threading.Event):
            release.set()
        thread = holder.get("thread")
        if isinstance(thread, threading.Thread):
            thread.join(30)

    return Fault("isthmus_db", "locked", frozenset({CENTRAL}), inject=inject, lift=lift)


def lift_all_safely(faults: list[Fault]) -> list[str]:
    """Lift every fault, the last injected first; the errors, never raised."""
    errors = []
    for fault in reversed(faults):
        try:
            fault.lift()
        except Exception as err:  # noqa: BLE001 - every fault must get its chance to be lifted
            errors.append(f"{fault.name}: {err}")
    return errors


def wait_healthy(layout: Layout, timeout: float = 180) -> None:
    """Every service's health URL answers (after a lift)."""
    deadline = time.monotonic() + timeout
    for record in process.ServiceRecord.load_all(layout.run):
        if record.url:
            poll(functools.partial(process.http_ok, record.url), max(deadline - time.monotonic(), 0),
                 f"{record.name} healthy after the fault was lifted")
