"""The test sandbox: starting it, reaching it, and the command line tools/test.sh uses.

``python -m tests.sandboxes start STATE_DIR`` starts the sandbox the integration
tier shares; ``python -m tests.sandboxes others`` says which other sandboxes of
this checkout are running (the demo's, left up by ./tools/demo.sh), since the
tests run beside them on other ports.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
TEST_PAGE_LIMIT = 20
# The Admin API tests' job types, loaded by the shared sandbox's isthmus-admin.
TEST_JOB_TYPES_MODULE = "tests.integration.admin_handlers"
# The job worker's periods shortened for tests (production defaults elsewhere):
# binding_sync acts on a port changed seconds ago, not two minutes.
TEST_XJOB_TUNING = "[isthmus]\nbinding_sync_grace = 5\n"


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


def service_env() -> dict[str, str]:
    """The environment for ``isthmus sandbox`` commands: services they start can
    import ``tests.*`` (the test job types of the Admin API tests)."""
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def isthmus(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real ``isthmus`` console script."""
    result = subprocess.run([str(BIN / "isthmus"), *args], capture_output=True, text=True, timeout=timeout,
                            env=service_env())
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


def load_test_job_types(state_dir: Path) -> None:
    """Make the sandbox's isthmus-admin know the Admin API tests' job types: a file
    in its config directory (read at every start) and one restart. The job worker
    needs nothing: it claims only the types it knows, and the tests run their own."""
    from isthmus.sandbox import admin_api
    from isthmus.sandbox.layout import Layout

    layout = Layout.load(state_dir)
    assert layout is not None, f"no sandbox in {state_dir}"
    path = admin_api.config_dir(layout) / "50-test-job-types.conf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[jobs]\nhandler_modules = {TEST_JOB_TYPES_MODULE}\n")
    isthmus("sandbox", "restart", "isthmus-admin", "--state-dir", str(state_dir))


def write_xjob_tuning(state_dir: Path) -> None:
    """The test tuning in the job worker's config directory (read at every start),
    and one restart (``sandbox up`` wants an empty state directory: the file
    cannot be there before)."""
    from isthmus.sandbox import xjob
    from isthmus.sandbox.layout import Layout

    path = xjob.config_dir(Layout(state_dir=state_dir)) / "50-test-tuning.conf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TEST_XJOB_TUNING)
    isthmus("sandbox", "restart", "isthmus-xjob", "--state-dir", str(state_dir))


def start_sandbox(state_dir: Path) -> Sandbox:
    """The sandbox the integration tests run against, started in ``state_dir``.

    A small page limit in every Neutron: every list (Isthmus', Nova's, the
    tests') must page to the end for any test to pass. Servers are real network
    endpoints where the machine allows it (root): tests/integration/test_dataplane.py
    pings across regions. A stock Neutron next to central: the baseline of the
    differential fuzz tests (docs/fuzzing.md). Octavia in each region (the CCM's load
    balancers). The Admin API tests' job types in its isthmus-admin, the test
    tuning in its isthmus-xjob (TEST_XJOB_TUNING)."""
    base = free_base_port(int(os.environ.get("ISTHMUS_TEST_BASE_PORT", "31000")), 2)
    dataplane = ["--dataplane"] if dataplane_possible() else []
    up = isthmus("sandbox", "up", "--state-dir", str(state_dir), "--base-port", str(base),
                 "--neutron-page-limit", str(TEST_PAGE_LIMIT), "--stock-neutron", "--octavia", *dataplane,
                 check=False)
    if up.returncode != 0:
        isthmus("sandbox", "down", "--state-dir", str(state_dir), check=False)
        raise RuntimeError(f"sandbox up failed:\n{up.stdout}\n{up.stderr}")
    load_test_job_types(state_dir)
    write_xjob_tuning(state_dir)
    return Sandbox(state_dir, base, ("RegionOne", "RegionTwo"))


OVN_REGIONS = ("RegionOne", "RegionTwo", "RegionThree")


def ovn_problem() -> str | None:
    """Why the OVN tier cannot run here (None: it can)."""
    from isthmus.sandbox import ovn

    if not dataplane_possible():
        return "OVN regions need the dataplane (root, iproute2)"
    if not (ovn.root() / ovn.STAMP).exists():
        return f"no OVN root at {ovn.root()}: build it with tools/ovn-root.sh"
    return None


def start_ovn_sandbox(state_dir: Path) -> Sandbox:
    """The OVN tier's sandbox: three regions on ML2/OVN (docs/ovn.md), ports from
    ISTHMUS_TEST_OVN_BASE_PORT (24000), apart from the integration sandbox's."""
    base = free_base_port(int(os.environ.get("ISTHMUS_TEST_OVN_BASE_PORT", "24000")), len(OVN_REGIONS))
    # No small page limit here: the integration sandbox proves paging; this one
    # runs beside it and spends no requests it does not need. No Cinder either
    # (nine processes): no OVN test makes a volume.
    up = isthmus("sandbox", "up", "--ovn", "--no-volume", "--regions", ",".join(OVN_REGIONS),
                 "--state-dir", str(state_dir), "--base-port", str(base), check=False, timeout=900)
    if up.returncode != 0:
        isthmus("sandbox", "down", "--state-dir", str(state_dir), check=False)
        raise RuntimeError(f"sandbox up --ovn failed:\n{up.stdout}\n{up.stderr}")
    return Sandbox(state_dir, base, OVN_REGIONS)


@contextmanager
def running(start: Callable[[Path], Sandbox], state_dir: Path) -> Iterator[Sandbox]:
    """A sandbox a fixture started (``start``), stopped when the block ends; a
    start that fails fails the test with its output."""
    import pytest

    try:
        sandbox = start(state_dir)
    except RuntimeError as err:
        pytest.fail(str(err))
    try:
        yield sandbox
    finally:
        isthmus("sandbox", "down", "--state-dir", str(state_dir), check=False)


def running_others() -> list[str]:
    """One line per running sandbox of this checkout's default state dir (the demo's)."""
    from isthmus.sandbox.control import is_running
    from isthmus.sandbox.layout import DEFAULT_STATE_DIR, Layout

    layout = Layout.load(Path(DEFAULT_STATE_DIR).resolve())
    if layout is None or not is_running(layout):
        return []
    last_port = layout.base_port + 10 * (len(layout.regions) + 1) - 1
    return [f"the sandbox in {layout.state_dir} (ports {layout.base_port}-{last_port}) is running; the tests "
            f"start their own beside it, on free ports. Stop it with: .venv/bin/isthmus sandbox down "
            f"--state-dir {layout.state_dir}"]


def main(argv: list[str]) -> int:
    if argv[:1] in (["start"], ["start-ovn"]) and len(argv) == 2:
        start = start_sandbox if argv[0] == "start" else start_ovn_sandbox
        try:
            print(start(Path(argv[1])).state_dir)
        except RuntimeError as err:
            print(err, file=sys.stderr)
            return 1
        return 0
    if argv == ["others"]:
        for line in running_others():
            print(f"[test] note: {line}")
        return 0
    print("usage: python -m tests.sandboxes start|start-ovn STATE_DIR | others", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
