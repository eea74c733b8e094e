"""OVN regions of the sandbox (``up --ovn`` / ``--ovn-regions``): each such region
runs its own OVN, as a real ML2/OVN deployment does, and one chassis.

* **Databases and northd**, in the machine's namespace: the Northbound and
  Southbound ovsdb-servers (loopback TCP for Neutron and the Isthmus worker, a
  Unix socket for the chassis) and ovn-northd.
* **The chassis**, in the region's host namespace (the dataplane's): an
  ovsdb-server with Open vSwitch's database, ovs-vswitchd on the userspace
  datapath (no kernel module here) and ovn-controller. The host's underlay
  address moves onto the OVS bridge ``br-ul`` (userspace tunnels leave through
  a bridge that holds the local IP); geneve runs between the regions' chassis.
  The chassis is its region's interconnection chassis (``ovn-is-interconn``):
  ovn-controller builds tunnels to remote chassis only from such a one.

The binaries come from a Debian 13 root built once by ``tools/ovn-root.sh``
(OVN 25.03, OVS 3.5: this machine's Debian 12 ships OVN 23.03). They run with
that root's dynamic loader and libraries, not in a chroot, so they see the
sandbox's own files and sockets; nothing is installed on the machine.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from isthmus.sandbox import process
from isthmus.sandbox.dataplane import kernel, names
from isthmus.sandbox.layout import Layout

ROOT_ENV = "ISTHMUS_OVN_ROOT"
STAMP = ".isthmus-ovn-root"
UNDERLAY_BRIDGE = "br-ul"
INTEGRATION_BRIDGE = "br-int"
LIBDIR = "usr/lib/x86_64-linux-gnu"
# Where each binary lives in the root (Debian's alternatives link ovs-vswitchd
# through /etc, which points outside the root when read from here).
PATHS = {
    "ovs-vswitchd": "usr/lib/openvswitch-switch/ovs-vswitchd",
    "ovsdb-server": "usr/sbin/ovsdb-server",
    "ovn-northd": "usr/bin/ovn-northd",
    "ovn-controller": "usr/bin/ovn-controller",
    "ethtool": "usr/sbin/ethtool",
}
COMMAND_TIMEOUT = 10


def root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "isthmus" / "ovn-root"
    return Path(os.environ.get(ROOT_ENV) or default)


def check_root(say: Callable[[str], None] = print) -> None:
    """Before anything starts: the root, built now when missing (as root, from a
    checkout: tools/ovn-root.sh, a progress line per step), else one line saying how."""
    if (root() / STAMP).exists():
        return
    script = Path(__file__).resolve().parents[2] / "tools" / "ovn-root.sh"
    if os.geteuid() == 0 and script.exists():
        say(f"--ovn: building the OVN root once ({script}; about a minute)")
        done = subprocess.run([str(script)], capture_output=True, text=True)
        for line in (done.stdout + done.stderr).splitlines():
            say(line)
        if done.returncode == 0 and (root() / STAMP).exists():
            return
    raise process.SandboxError(f"--ovn needs the OVN root at {root()} (set {ROOT_ENV} to move it): "
                               "build it once with tools/ovn-root.sh (as root, about a minute)")


def binary(name: str) -> list[str]:
    """argv prefix that runs one of the root's programs with the root's loader."""
    base = root()
    return [str(base / "lib64" / "ld-linux-x86-64.so.2"), "--library-path", str(base / LIBDIR),
            str(base / PATHS.get(name, f"usr/bin/{name}"))]


# Programs a neutron-server of an OVN region runs by name (ML2/OVN calls
# ovsdb-client), and the agent's tools: wrappers on its PATH run the root's.
WRAPPED = ("ovsdb-client", "ovn-nbctl", "ovn-sbctl", "ovs-vsctl", "ovs-appctl", "ovn-appctl", "ethtool")


def bin_dir(layout: Layout) -> Path:
    return layout.run / "ovn-bin"


def write_wrappers(layout: Layout) -> Path:
    folder = bin_dir(layout)
    folder.mkdir(parents=True, exist_ok=True)
    for name in WRAPPED:
        path = folder / name
        path.write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in binary(name)) + ' "$@"\n')
        path.chmod(0o755)
    return folder


def schema(name: str) -> str:
    folder = "openvswitch" if name == "vswitch" else "ovn"
    return str(root() / "usr" / "share" / folder / f"{name}.ovsschema")


def state_dir(layout: Layout, region: str) -> Path:
    """Databases, sockets and control sockets of the region's OVN and chassis."""
    return layout.run / f"ovn-{region}"


def nb_connection(layout: Layout, region: str) -> str:
    return f"tcp:127.0.0.1:{layout.region_port(region, 'ovn_nb')}"


def sb_connection(layout: Layout, region: str) -> str:
    return f"tcp:127.0.0.1:{layout.region_port(region, 'ovn_sb')}"


def chassis_name(region: str) -> str:
    from isthmus.sandbox.nova import compute_host

    return compute_host(region)


def env(layout: Layout, region: str) -> dict[str, str]:
    """OVS and OVN keep pid files, control sockets and the bridges' OpenFlow
    sockets in their run directory: the region's own, so regions never meet."""
    folder = str(state_dir(layout, region))
    return {f"{project}_{kind}": folder for project in ("OVS", "OVN") for kind in ("RUNDIR", "LOGDIR", "DBDIR")}


def vsctl(layout: Layout, region: str) -> list[str]:
    """ovs-vsctl on the region's chassis database (argv prefix; runs anywhere)."""
    return [str(bin_dir(layout) / "ovs-vsctl"), f"--db=unix:{state_dir(layout, region) / 'db.sock'}",
            f"--timeout={COMMAND_TIMEOUT}"]


def ethtool(layout: Layout) -> list[str]:
    return [str(bin_dir(layout) / "ethtool")]


def _run(layout: Layout, region: str, argv: list[str]) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT * 2,
                                env={**os.environ, **env(layout, region)}, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as err:
        raise process.SandboxError(f"{Path(argv[3]).name}: no answer in {COMMAND_TIMEOUT * 2}s") from err
    if result.returncode != 0:
        raise process.SandboxError(f"{' '.join(argv[3:])}: {result.stderr.strip() or result.returncode}")
    return result.stdout


def prepare(layout: Layout, region: str) -> None:
    """Empty databases (every ``up`` starts from nothing, as Neutron's do)."""
    write_wrappers(layout)
    folder = state_dir(layout, region)
    folder.mkdir(parents=True, exist_ok=True)
    for db, name in (("nb.db", "ovn-nb"), ("sb.db", "ovn-sb"), ("conf.db", "vswitch")):
        (folder / db).unlink(missing_ok=True)
        _run(layout, region, [*binary("ovsdb-tool"), "create", str(folder / db), schema(name)])


def _daemon(layout: Layout, region: str, name: str, argv: list[str], namespace: str | None = None):
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    return process.start(name, [*prefix, *argv], log=layout.logs / f"{name}.log", run_dir=layout.run,
                         env=env(layout, region))


DATABASES = {"nb": ("ovn_nb", "nb.sock"), "sb": ("ovn_sb", "sb.sock")}


def start_database(layout: Layout, region: str, db: str) -> process.ServiceRecord:
    """The Northbound ("nb") or Southbound ("sb") ovsdb-server; returns once it listens."""
    folder = state_dir(layout, region)
    service, sock = DATABASES[db]
    port = layout.region_port(region, service)
    record = _daemon(layout, region, f"ovn-{db}-{region}", [
        *binary("ovsdb-server"), str(folder / f"{db}.db"), f"--remote=ptcp:{port}:127.0.0.1",
        f"--remote=punix:{folder / sock}", f"--unixctl={folder / f'{db}.ctl'}", f"--pidfile={folder / f'{db}.pid'}"])
    process.wait_until(functools.partial(process.port_is_listening, port),
                       f"waiting for OVN {db.upper()} of {region}", 60, record)
    return record


def start_northd(layout: Layout, region: str) -> process.ServiceRecord:
    folder = state_dir(layout, region)
    return _daemon(layout, region, f"ovn-northd-{region}", [
        *binary("ovn-northd"), f"--ovnnb-db=unix:{folder / 'nb.sock'}", f"--ovnsb-db=unix:{folder / 'sb.sock'}",
        f"--unixctl={folder / 'northd.ctl'}", f"--pidfile={folder / 'northd.pid'}"])


def start_databases(layout: Layout, region: str) -> None:
    """NB and SB ovsdb-servers and ovn-northd; returns once both databases answer."""
    start_database(layout, region, "nb")
    start_database(layout, region, "sb")
    start_northd(layout, region)


def start_switch_database(layout: Layout, region: str) -> process.ServiceRecord:
    """Open vSwitch's ovsdb-server in the region's host namespace."""
    folder = state_dir(layout, region)
    record = _daemon(layout, region, f"ovs-db-{region}", [
        *binary("ovsdb-server"), str(folder / "conf.db"), f"--remote=punix:{folder / 'db.sock'}",
        f"--unixctl={folder / 'ovsdb.ctl'}", f"--pidfile={folder / 'ovsdb.pid'}"], names.host_namespace(layout, region))
    process.wait_until(lambda: (folder / "db.sock").exists(), f"waiting for Open vSwitch's database of {region}",
                       60, record)
    return record


def start_vswitchd(layout: Layout, region: str) -> process.ServiceRecord:
    """ovs-vswitchd (userspace datapath), and the underlay address on ``br-ul``:
    userspace tunnels leave through a bridge holding the local address (again
    after a restart: the bridge's device goes with the daemon)."""
    folder = state_dir(layout, region)
    host_ns = names.host_namespace(layout, region)
    vs = vsctl(layout, region)
    record = _daemon(layout, region, f"ovs-vswitchd-{region}", [
        *binary("ovs-vswitchd"), f"unix:{folder / 'db.sock'}", f"--unixctl={folder / 'vswitchd.ctl'}",
        f"--pidfile={folder / 'vswitchd.pid'}"], host_ns)
    _run(layout, region, [*vs, "--may-exist", "add-br", UNDERLAY_BRIDGE, "--", "set", "bridge", UNDERLAY_BRIDGE,
                          "datapath_type=netdev", "--", "--may-exist", "add-port", UNDERLAY_BRIDGE,
                          names.UNDERLAY_LINK])
    address = f"{names.tunnel_ip(layout, region)}/{names.UNDERLAY.prefixlen}"

    def addressed() -> bool:
        try:
            kernel.run(["ip", "-n", host_ns, "addr", "flush", "dev", names.UNDERLAY_LINK])
            kernel.run(["ip", "-n", host_ns, "addr", "replace", address, "dev", UNDERLAY_BRIDGE])
            kernel.run(["ip", "-n", host_ns, "link", "set", UNDERLAY_BRIDGE, "up"])
        except kernel.KernelError:
            return False  # the bridge's device is not there yet
        return True

    process.wait_until(addressed, f"waiting for {UNDERLAY_BRIDGE} of {region}", 30, record)
    return record


def start_controller(layout: Layout, region: str) -> process.ServiceRecord:
    """ovn-controller; returns once its chassis is in the Southbound database."""
    folder = state_dir(layout, region)
    record = _daemon(layout, region, f"ovn-controller-{region}", [
        *binary("ovn-controller"), f"unix:{folder / 'db.sock'}", f"--unixctl={folder / 'controller.ctl'}",
        f"--pidfile={folder / 'controller.pid'}"], names.host_namespace(layout, region))
    sbctl = [*binary("ovn-sbctl"), f"--db=unix:{folder / 'sb.sock'}", f"--timeout={COMMAND_TIMEOUT}"]

    def registered() -> bool:
        return bool(_run(layout, region, [*sbctl, "--bare", "--columns=name", "find", "chassis",
                                          f"name={chassis_name(region)}"]).strip())

    process.wait_until(registered, f"waiting for the OVN chassis of {region}", 60, record)
    return record


def start_chassis(layout: Layout, region: str) -> None:
    """Open vSwitch and ovn-controller in the region's host namespace; returns once
    the chassis is in the Southbound database."""
    from isthmus.sandbox.nova import compute_host

    folder = state_dir(layout, region)
    start_switch_database(layout, region)
    vs = vsctl(layout, region)
    _run(layout, region, [*vs, "--no-wait", "init"])
    start_vswitchd(layout, region)
    _run(layout, region, [*vs, "set", "open_vswitch", ".",
                          f"external_ids:system-id={chassis_name(region)}",
                          f"external_ids:hostname={compute_host(region)}",
                          f"external_ids:ovn-remote=unix:{folder / 'sb.sock'}",
                          "external_ids:ovn-encap-type=geneve",
                          f"external_ids:ovn-encap-ip={names.tunnel_ip(layout, region)}",
                          "external_ids:ovn-bridge-datapath-type=netdev",
                          "external_ids:ovn-is-interconn=true"])
    start_controller(layout, region)


def starters(layout: Layout) -> dict[str, Callable[[], object]]:
    """``isthmus sandbox restart`` of each OVN daemon (its databases are kept)."""
    found: dict[str, Callable[[], object]] = {}
    for region in layout.ovn_regions:
        found.update({
            f"ovn-nb-{region}": functools.partial(start_database, layout, region, "nb"),
            f"ovn-sb-{region}": functools.partial(start_database, layout, region, "sb"),
            f"ovn-northd-{region}": functools.partial(start_northd, layout, region),
            f"ovs-db-{region}": functools.partial(start_switch_database, layout, region),
            f"ovs-vswitchd-{region}": functools.partial(start_vswitchd, layout, region),
            f"ovn-controller-{region}": functools.partial(start_controller, layout, region),
        })
    return found
