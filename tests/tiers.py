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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


@contextmanager
def unit_guard() -> Iterator[None]:
    """Refuse network sockets and child processes while a unit test runs."""
    real_connect, real_connect_ex, real_bind = socket.socket.connect, socket.socket.connect_ex, socket.socket.bind
    real_popen_init, real_fork = subprocess.Popen.__init__, os.fork

    def network(sock: socket.socket) -> bool:
        return sock.family in (socket.AF_INET, socket.AF_INET6)

    def connect(self: socket.socket, address):  # type: ignore[no-untyped-def]
        if network(self):
            raise _refuse(f"connected to {address!r}")
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address):  # type: ignore[no-untyped-def]
        if network(self):
            raise _refuse(f"connected to {address!r}")
        return real_connect_ex(self, address)

    def bind(self: socket.socket, address):  # type: ignore[no-untyped-def]
        if network(self):
            raise _refuse(f"listened on {address!r}")
        return real_bind(self, address)

    def popen_init(self, args, *rest, **kwargs):  # type: ignore[no-untyped-def]
        raise _refuse(f"started a process: {args!r}")

    def fork():  # type: ignore[no-untyped-def]
        raise _refuse("forked")

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.socket.bind = bind  # type: ignore[method-assign]
    subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
    os.fork = fork
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex = real_connect, real_connect_ex  # type: ignore[method-assign]
        socket.socket.bind = real_bind  # type: ignore[method-assign]
        subprocess.Popen.__init__ = real_popen_init  # type: ignore[method-assign]
        os.fork = real_fork


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tier", choices=TIERS, help="run only the tests of this tier (tests/tiers.py)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "component: a unit-style test that needs a local server or process "
                                       "(tests/tiers.py); tools/test.sh runs it in the component tier")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = config.getoption("--tier")
    if not wanted:
        return
    kept = [item for item in items if tier_of(item) == wanted]
    dropped = [item for item in items if tier_of(item) != wanted]
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
