"""The test tiers, decided in one place, and the unit tier's guard.

- ``unit``: pure logic. No sockets to anywhere (a Unix socket pair, as an asyncio
  loop makes for itself, is fine), no child processes, no database servers, no
  browser. Runs in a couple of minutes on two cores with no sandbox.
- ``component``: a local server or process but no OpenStack: the kmock tier,
  PostgreSQL/MariaDB engines, headless Chromium, job-worker processes, HTTP
  servers in threads. Everything under ``tests/component/``, and any test or
  parameter marked ``component`` (say the MariaDB case of a test that also runs
  on SQLite).
- ``integration``: against the shared sandbox (``tests/integration/``).

``pytest --tier unit`` (or component, integration) keeps one tier; tools/test.sh
runs them cheapest first. The guard makes the classification checkable: a test
left in the unit tier that opens a TCP socket or starts a process fails, naming
what it did and where it should go, instead of slowing the unit tier silently.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

TIERS = ("unit", "component", "integration")
TESTS = Path(__file__).resolve().parent


def tier_of(item: pytest.Item) -> str:
    try:
        top = Path(item.path).resolve().relative_to(TESTS).parts[0]
    except ValueError:
        return "unit"
    if top in ("integration", "conformance"):  # conformance: Tempest against the sandbox
        return "integration"
    if top == "component" or item.get_closest_marker("component"):
        return "component"
    return "unit"


class UnitTierViolation(AssertionError):
    pass


def _refuse(what: str) -> UnitTierViolation:
    return UnitTierViolation(
        f"a unit test {what}: move it to tests/component/ (or mark it, or its parameter, "
        "'component') - the unit tier has no sockets, processes or servers (tests/tiers.py)")


def _network(sock: socket.socket) -> bool:
    return sock.family in (socket.AF_INET, socket.AF_INET6)


def _guarded(real: Callable[..., Any], verb: str) -> Callable[..., Any]:
    def call(sock: socket.socket, address: Any) -> Any:
        if _network(sock):
            raise _refuse(f"{verb} {address!r}")
        return real(sock, address)
    return call


def _refused(what: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise _refuse(what)
    return call


@contextmanager
def unit_guard() -> Iterator[None]:
    """Refuse network sockets and child processes while a unit test runs."""
    patches: list[tuple[object, str, Callable[..., Any]]] = [
        (socket.socket, "connect", _guarded(socket.socket.connect, "connected to")),
        (socket.socket, "connect_ex", _guarded(socket.socket.connect_ex, "connected to")),
        (socket.socket, "bind", _guarded(socket.socket.bind, "listened on")),
        (subprocess.Popen, "__init__", _refused("started a process")),
        (os, "fork", _refused("forked")),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, real in saved:
            setattr(owner, name, real)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tier", choices=TIERS, help="run only the tests of this tier (tests/tiers.py)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "component: a unit-style test that needs a local server or process "
                                       "(tests/tiers.py); tools/test.sh runs it in the component tier")


# The exclusive phase runs one test at a time, with the OVN tests' job beside it
# (tools/test.sh). Its modules that keep both cores busy (Tempest, the CCM's,
# the dataplane's, the fault campaign: measured idle under 15%) run last, after
# that job; the others wait on outages and timeouts (about half the machine idle)
# and leave it room. A module's tests stay together (module fixtures).
RUN_LAST = ("conformance/test_tempest.py", "integration/test_ccm.py", "integration/test_ccm_lb.py",
            "integration/test_dataplane.py", "integration/test_fault_campaign.py")


def run_last_rank(item: pytest.Item) -> int:
    try:
        where = Path(item.path).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return -1
    return RUN_LAST.index(where) if where in RUN_LAST else -1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=run_last_rank)  # stable: the rest keep their order
    wanted = config.getoption("--tier")
    if not wanted:
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (kept if tier_of(item) == wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if tier_of(item) != "unit":
        yield
        return
    with unit_guard():
        yield
