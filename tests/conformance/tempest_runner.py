"""Run a Tempest test list against the sandbox, once directly against one region
and once through Isthmus (CentralRegion: the gateway for compute and volume,
central Neutron for network), and compare: every test that passes directly must
pass through Isthmus, unless ``exceptions.txt`` names it with the reason.

    .venv/bin/python -m tests.conformance.tempest_runner --state-dir .sandbox \\
        [--list compute_full] [--concurrency 2] [--out conformance-report]

Writes one Tempest workspace per target under ``--out`` (tempest.conf, logs, the
subunit stream) and prints a table of passed/failed/skipped per target.
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
LISTS = HERE / "lists"
FIXED_NETWORK = "tempest-fixed"


@dataclass(frozen=True)
class Target:
    name: str  # "direct" | "isthmus"
    compute_region: str
    network_region: str


@dataclass
class Outcome:
    passed: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    skipped: set[str] = field(default_factory=set)

    def counts(self) -> tuple[int, int, int]:
        return len(self.passed), len(self.failed), len(self.skipped)


def targets(direct_region: str) -> list[Target]:
    return [Target("direct", direct_region, direct_region), Target("isthmus", "CentralRegion", "CentralRegion")]


def tempest_conf(layout, target: Target, workspace: Path) -> str:
    """tempest.conf for the sandbox (admin from its clouds.yaml, dynamic credentials,
    a shared network made at central as the fixed network)."""
    from isthmus.sandbox.glance import TINY_IMAGE_ID
    from isthmus.sandbox.nova import FLAVOR_ALT_ID, FLAVOR_ID

    auth_url = f"http://127.0.0.1:{layout.keystone_port}/v3"
    image_region = target.compute_region
    return f"""[DEFAULT]
log_dir = {workspace}/logs
log_file = tempest.log

[oslo_concurrency]
lock_path = {workspace}/locks

[auth]
admin_username = admin
admin_password = isthmus
admin_project_name = admin
admin_domain_name = Default
use_dynamic_credentials = true
create_isolated_networks = false
tempest_roles = member

[identity]
uri_v3 = {auth_url}
auth_version = v3
region = {target.compute_region}
disable_ssl_certificate_validation = true

[identity-feature-enabled]
api_v2 = false

[compute]
region = {target.compute_region}
image_ref = {TINY_IMAGE_ID}
image_ref_alt = {TINY_IMAGE_ID}
flavor_ref = {FLAVOR_ID}
flavor_ref_alt = {FLAVOR_ALT_ID}
fixed_network_name = {FIXED_NETWORK}
min_compute_nodes = 1
build_timeout = 300
max_microversion = latest

[compute-feature-enabled]
resize = false
cold_migration = false
live_migration = false
vnc_console = false
spice_console = false
serial_console = false
rescue = false
change_password = false
shelve = false
snapshot = false
console_output = true
attach_encrypted_volume = false
interface_attach = false

[volume]
region = {target.compute_region}
build_timeout = 300

[volume-feature-enabled]
backup = false
snapshot = true

[network]
region = {target.network_region}
project_networks_reachable = false
build_timeout = 300

[network-feature-enabled]
ipv6 = true
api_extensions = all

[image]
region = {image_region}

[placement]
region = {target.compute_region}

[service_available]
nova = true
cinder = true
neutron = true
glance = true
swift = false
horizon = false

[validation]
run_validation = false
"""


def ensure_fixed_network(layout) -> str:
    """A shared network (and subnet) at central: what every Tempest server boots on."""
    from isthmus.sandbox.keystone import admin_connection

    conn = admin_connection(layout, "CentralRegion")
    net = conn.network.find_network(FIXED_NETWORK)
    if net is None:
        net = conn.network.create_network(name=FIXED_NETWORK, shared=True)
    if not list(conn.network.subnets(network_id=net.id)):
        conn.network.create_subnet(network_id=net.id, name=FIXED_NETWORK, ip_version=4, cidr="10.250.0.0/16")
    return net.id


def read_list(name: str) -> list[str]:
    lines = (LISTS / f"{name}.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def exceptions() -> dict[str, str]:
    """Test id (regex) -> why it cannot pass through Isthmus (a design limit, not a bug)."""
    out = {}
    for line in (HERE / "exceptions.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            test, _, reason = line.partition(" ")
            out[test] = reason.strip()
    return out


_INIT_LOCK = threading.Lock()


def run(layout, target: Target, list_name: str, out: Path, concurrency: int,
        only: list[str] | None = None) -> Outcome:
    """``only``: exact test ids instead of the list (a re-run of what failed)."""
    workspace = out / target.name
    tempest = Path(sys.executable).with_name("tempest")
    if not (workspace / ".stestr.conf").exists():
        out.mkdir(parents=True, exist_ok=True)
        # Its own workspace registry: the user's ~/.tempest is left alone, and two
        # runs (or two reports) never clash over a workspace name.
        # One init at a time: the first tempest ever run on a machine creates ~/.tempest/etc,
        # and two at once race on it (one fails with "File exists").
        with _INIT_LOCK:
            init = subprocess.run([str(tempest), "init", "--workspace-path",
                                   str(out / f"{target.name}.workspaces.yaml"), str(workspace)],
                                  capture_output=True, text=True)
        if init.returncode != 0:
            raise RuntimeError(f"tempest init {workspace} failed ({init.returncode}): {init.stderr[-2000:]}")
    for sub in ("etc", "logs", "locks"):
        (workspace / sub).mkdir(exist_ok=True)
    conf = workspace / "etc" / "tempest.conf"
    conf.write_text(tempest_conf(layout, target, workspace))
    include = workspace / "include.txt"
    patterns = [f"^{re.escape(t)}" for t in only] if only else read_list(list_name)
    include.write_text("\n".join(patterns) + "\n")
    subunit = workspace / "results.subunit"
    with open(subunit, "wb") as stream:
        subprocess.run([str(tempest), "run", "--config-file", str(conf), "--include-list", str(include),
                        "--concurrency", str(concurrency), "--subunit"], cwd=workspace, stdout=stream,
                       stderr=open(workspace / "logs" / "run.stderr", "wb"))
    return parse_subunit(subunit.read_bytes())


def run_both(layout, list_name: str, out: Path, concurrency: int) -> dict[Target, Outcome]:
    """The direct and the Isthmus run at the same time (they share nothing but the sandbox)."""
    from concurrent.futures import ThreadPoolExecutor

    pair = targets(layout.regions[0])
    with ThreadPoolExecutor(len(pair)) as pool:
        outcomes = list(pool.map(lambda t: run(layout, t, list_name, out, concurrency), pair))
    return dict(zip(pair, outcomes, strict=True))


def confirmed_regressions(layout, list_name: str, out: Path, direct: Outcome, isthmus: Outcome,
                          concurrency: int = 2) -> list[str]:
    """``regressions``, each run once more through Isthmus alone: a sandbox on a busy
    machine can time out once; a real regression fails again."""
    lost = regressions(direct, isthmus, exceptions())
    if not lost:
        return []
    again = run(layout, targets(layout.regions[0])[1], list_name, out / "rerun", concurrency, only=lost)
    return sorted(t for t in lost if t not in again.passed)


def parse_subunit(data: bytes) -> Outcome:
    import subunit
    import testtools
    from testtools.testresult.real import TestDict

    outcome = Outcome()
    statuses: dict[str, str] = {}

    def record(test: TestDict) -> None:
        statuses[_test_id(test["id"])] = test["status"]

    stream = subunit.ByteStreamToStreamResult(io.BytesIO(data), non_subunit_name="stdout")
    result = testtools.StreamToDict(record)
    result.startTestRun()
    stream.run(result)
    result.stopTestRun()
    # A class skipped in setUpClass (a microversion out of the configured range) reports
    # its tests as listed but never run ("exists"): they are skipped, not failed.
    skipped_classes = {m.group(1) for test_id, status in statuses.items()
                       if status == "skip" and (m := re.match(r"setUpClass \((.+)\)$", test_id))}
    for test_id, status in statuses.items():
        if test_id.startswith("setUpClass") or test_id.startswith("tearDownClass"):
            if status == "fail":
                outcome.failed.add(test_id)
            continue
        if status == "exists" and test_id.rsplit(".", 1)[0] in skipped_classes:
            status = "skip"
        {"success": outcome.passed, "xfail": outcome.passed, "skip": outcome.skipped}.get(
            status, outcome.failed).add(test_id)
    return outcome


def _test_id(raw: str) -> str:
    return re.sub(r"\[.*\]$", "", raw)


def regressions(direct: Outcome, isthmus: Outcome, allowed: dict[str, str]) -> list[str]:
    """Tests that pass directly but not through Isthmus, exceptions aside."""
    lost = direct.passed - isthmus.passed
    return sorted(t for t in lost if not any(re.search(p, t) for p in allowed))


def table(results: dict[str, Outcome]) -> str:
    rows = ["| endpoint | passed | failed | skipped |", "|---|---|---|---|"]
    for name, outcome in results.items():
        p, f, s = outcome.counts()
        rows.append(f"| {name} | {p} | {f} | {s} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from isthmus.sandbox.layout import Layout

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", default=".sandbox")
    parser.add_argument("--list", action="append", dest="lists", help="list name(s) under tests/conformance/lists")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("conformance-report"))
    args = parser.parse_args(argv)
    layout = Layout.load(Path(args.state_dir))
    if layout is None:
        print(f"no sandbox in {args.state_dir}", file=sys.stderr)
        return 2
    ensure_fixed_network(layout)
    failed = False
    for list_name in args.lists or ["compute_full", "volume_full", "network_full"]:
        results = {f"{t.name} ({t.compute_region})": outcome
                   for t, outcome in run_both(layout, list_name, args.out / list_name, args.concurrency).items()}
        print(f"\n## {list_name}\n\n{table(results)}")
        direct, isthmus = results.values()
        lost = confirmed_regressions(layout, list_name, args.out / list_name, direct, isthmus, args.concurrency)
        for test in lost:
            print(f"  passes directly, fails through Isthmus: {test}")
        failed = failed or bool(lost)
        print(f"  failed through Isthmus: {sorted(isthmus.failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
