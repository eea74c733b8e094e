"""Shared fixtures: the real sandbox that integration tests run against."""

from __future__ import annotations

# Before any test module pulls in neutron: oslo_service.wsgi imports eventlet.wsgi,
# whose green BaseHTTPServer re-imports http.server with green sockets and threads.
# It leaves that copy in sys.modules unless the stdlib one was imported first (and
# as the ``http`` package's attribute either way, hence ``from http.server import``
# in product code). A real-thread HTTP server built from the green copy hangs in
# eventlet's hub on shutdown: the CCM health tests did, for CI's whole budget.
import http.server  # noqa: F401 - imported first on purpose, see above
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
TEST_PAGE_LIMIT = 20


@dataclass(frozen=True)
class Sandbox:
    state_dir: Path
    base_port: int
    regions: tuple[str, ...]

    @property
    def clouds_yaml(self) -> Path:
        return self.state_dir / "clouds.yaml"

    def connect(self, region: str, cloud: str = "isthmus-demo"):
        import openstack.config

        config = openstack.config.OpenStackConfig(config_files=[str(self.clouds_yaml)])
        return openstack.connection.Connection(config=config.get_one(cloud=cloud, region_name=region))

    def env(self) -> dict[str, str]:
        return {**os.environ, "OS_CLIENT_CONFIG_FILE": str(self.clouds_yaml)}


def isthmus(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real ``isthmus`` console script."""
    result = subprocess.run([str(BIN / "isthmus"), *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"isthmus {' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def free_base_port(start: int, regions: int) -> int:
    """The first block of ports (base .. base+10*(regions+1)) with nothing listening."""
    from isthmus.sandbox.process import port_is_free

    for base in range(start, 60000, 500):
        if all(port_is_free(p) for p in range(base, base + 10 * (regions + 1))):
            return base
    raise RuntimeError("no free port block")


def dataplane_possible() -> bool:
    from isthmus.sandbox.dataplane.host import effective_capabilities, preflight_problem

    return preflight_problem(effective_capabilities()) is None


def start_sandbox(state_dir: Path) -> Sandbox:
    """The sandbox the integration tests run against, started in ``state_dir``.

    A small page limit in every Neutron: every list (Isthmus', Nova's, the
    tests') must page to the end for any test to pass. Servers are real network
    endpoints where the machine allows it (root): tests/integration/test_dataplane.py
    pings across regions. A stock Neutron next to central: the baseline of the
    differential fuzz tests (docs/fuzzing.md). Octavia in each region (the CCM's load
    balancers)."""
    base = free_base_port(int(os.environ.get("ISTHMUS_TEST_BASE_PORT", "31000")), 2)
    dataplane = ["--dataplane"] if dataplane_possible() else []
    up = isthmus("sandbox", "up", "--state-dir", str(state_dir), "--base-port", str(base),
                 "--neutron-page-limit", str(TEST_PAGE_LIMIT), "--stock-neutron", "--octavia", *dataplane,
                 check=False)
    if up.returncode != 0:
        isthmus("sandbox", "down", "--state-dir", str(state_dir), check=False)
        raise RuntimeError(f"sandbox up failed:\n{up.stdout}\n{up.stderr}")
    return Sandbox(state_dir, base, ("RegionOne", "RegionTwo"))


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory) -> Iterator[Sandbox]:
    """A full sandbox (compute in RegionOne and RegionTwo), started once per session.

    Set ISTHMUS_SANDBOX_DIR to an already running sandbox to skip start/stop
    (tools/test.sh starts one for all its pytest runs; handy while developing)."""
    from isthmus.sandbox.layout import Layout

    existing = os.environ.get("ISTHMUS_SANDBOX_DIR")
    if existing:
        layout = Layout.load(Path(existing))
        assert layout is not None, f"no sandbox in {existing}"
        yield Sandbox(layout.state_dir, layout.base_port, layout.regions)
        return
    state_dir = tmp_path_factory.mktemp("sandbox")
    try:
        started = start_sandbox(state_dir)
    except RuntimeError as err:
        pytest.fail(str(err))
    try:
        yield started
    finally:
        isthmus("sandbox", "down", "--state-dir", str(state_dir), check=False)


if __name__ == "__main__":
    # python -m tests.conftest STATE_DIR: start the test sandbox (tools/test.sh).
    try:
        print(start_sandbox(Path(sys.argv[1])).state_dir)
    except RuntimeError as err:
        sys.exit(str(err))
