"""``isthmus-ccm``: the multi-region cloud controller manager process.

One loop, run only by the Lease holder: list Nodes, initialise tainted ones
(every ``--node-sync-period``), check NotReady ones (every
``--node-monitor-period``), re-sync addresses (every
``--node-status-update-frequency``). The Lease is renewed on its own thread
so a slow cloud call does not cost the leadership.

Startup is strict where OCCM is (bad config, Keystone authentication) and
lenient per region: a region missing from the catalog is reported and only
its nodes are affected.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from isthmus.ccm.controllers.kube import NodeAPI
from isthmus.ccm.controllers.leader import LeaseElector
from isthmus.ccm.controllers.lifecycle import LifecycleController
from isthmus.ccm.controllers.node import NodeController

LOG = logging.getLogger("isthmus.ccm")


@dataclass
class Periods:
    node_sync: float = 5.0
    node_monitor: float = 5.0  # upstream --node-monitor-period
    node_status_update: float = 300.0  # upstream --node-status-update-frequency
    lease_retry: float = 2.0


@dataclass
class Manager:
    """The controllers and their schedule; ``step`` is one tick of the loop."""

    nodes: NodeAPI
    node_controller: NodeController
    lifecycle: LifecycleController
    periods: Periods
    clock: Callable[[], float] = time.monotonic
    # Checked before every node: a replica that lost the Lease mid-pass stops at once
    # instead of finishing a long pass next to the new leader.
    active: Callable[[], bool] = field(default=lambda: True)
    _last: dict[str, float] | None = None

    def _due(self, what: str, period: float) -> bool:
        last = (self._last or {}).get(what)
        if last is not None and self.clock() - last < period:
            return False
        self._last = {**(self._last or {}), what: self.clock()}
        return True

    def step(self) -> None:
        jobs = [(name, period) for name, period in (
            ("sync", self.periods.node_sync),
            ("monitor", self.periods.node_monitor),
            ("addresses", self.periods.node_status_update),
        ) if self._due(name, period)]
        if not jobs:
            return
        views = self.nodes.list()  # one list serves every controller due now
        for name, _ in jobs:
            batch = self._while_active(views, name)
            if name == "sync":
                self.node_controller.sync(batch)
            elif name == "monitor":
                self.lifecycle.monitor(batch)
            else:
                self.node_controller.update_addresses(batch)

    def _while_active(self, views: Iterable[Any], what: str) -> Iterator[Any]:
        for view in views:
            if not self.active():
                LOG.warning("no longer the leader: %s pass stopped", what)
                return
            yield view


def renew_forever(elector: LeaseElector, stop: threading.Event, period: float) -> None:
    while not stop.is_set():
        elector.try_acquire_or_renew()
        stop.wait(period)


def run(manager: Manager, elector: LeaseElector, stop: threading.Event, tick: float = 1.0) -> None:
    """Run until ``stop`` is set; act only while holding the Lease."""
    manager.active = elector.is_leader
    renewer = threading.Thread(target=renew_forever, args=(elector, stop, manager.periods.lease_retry),
                               name="lease", daemon=True)
    renewer.start()
    try:
        while not stop.is_set():
            if elector.is_leader():
                try:
                    manager.step()
                except Exception as exc:  # noqa: BLE001 - e.g. the API server is briefly away
                    LOG.warning("controller pass failed: %s", exc)
            stop.wait(tick)
    finally:
        renewer.join(timeout=manager.periods.lease_retry + 5)
        elector.release()


def kube_api_client(kubeconfig: str | None) -> Any:
    from kubernetes import client, config

    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="isthmus-ccm", description=__doc__.splitlines()[0])
    p.add_argument("--cloud-config", required=True, metavar="FILE", help="OCCM cloud.conf")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    p.add_argument("--leader-elect-resource-name", default="isthmus-cloud-controller-manager")
    p.add_argument("--leader-elect-resource-namespace", default="kube-system")
    p.add_argument("--identity", default=f"{socket.gethostname()}_{uuid.uuid4()}")
    p.add_argument("--node-monitor-period", type=float, default=5.0)
    p.add_argument("--node-status-update-frequency", type=float, default=300.0)
    p.add_argument("--delete-nodes-without-provider-id", action="store_true",
                   help="let the lifecycle controller delete NotReady nodes found by no name (upstream behaviour)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from kubernetes import client

    from isthmus.ccm.clients import OpenStackClients
    from isthmus.ccm.config import load_config
    from isthmus.ccm.errors import CCMError
    from isthmus.ccm.instances import Instances

    try:
        config = load_config(args.cloud_config)
        clients = OpenStackClients.from_config(config)
        clients.session.get_token()  # authentication failure is fatal, as in OCCM
    except Exception as exc:  # noqa: BLE001 - report one line and exit
        print(f"isthmus-ccm: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    for region, problem in clients.check().items():
        if problem:
            LOG.warning("region %s unusable for now (only its nodes are affected): %s", region, problem)
    instances = Instances(clients, config.regions, config.networking)
    api = kube_api_client(args.kubeconfig)
    nodes = NodeAPI(client.CoreV1Api(api))
    manager = Manager(
        nodes,
        NodeController(nodes, instances),
        LifecycleController(nodes, instances, args.delete_nodes_without_provider_id),
        Periods(node_monitor=args.node_monitor_period, node_status_update=args.node_status_update_frequency),
    )
    elector = LeaseElector(client.CoordinationV1Api(api), args.leader_elect_resource_name,
                           args.leader_elect_resource_namespace, args.identity)
    stop = threading.Event()
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    LOG.info("serving regions %s (default %s) as %s", ",".join(config.regions), config.default_region, args.identity)
    try:
        run(manager, elector, stop)
    except CCMError as exc:
        LOG.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
