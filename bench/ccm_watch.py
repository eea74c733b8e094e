"""Reconcile cost of the CCM's node controllers: watch (today) against the old polling loop.

Both modes run the production controllers (``NodeController``,
``LifecycleController``) and the production ``NodeAPI`` over the official
``kubernetes`` client, so every response is deserialised as in a cluster.
The API server is an in-process fake behind the client's REST layer (no
sockets: what is measured is the controller's cost, not the network's), and
the cloud is an in-process fake that answers at once and counts calls.

Time is simulated, one step per second, for ``--minutes`` (default 10) on
``--nodes`` (default 2,000) Nodes. What happens in the cluster, the same in
both modes:

* every Node's kubelet writes its status every 5 min (staggered):
  ``nodeStatusReportFrequency``; only a heartbeat time changes;
* a Node joins (tainted ``uninitialized``) every 30 s, between two polls;
* a Node goes NotReady for 2 min every minute (its server is fine);
* a Node whose server was deleted goes NotReady every 5 min (it gets deleted).

Modes:

* **polling** (the loop before the watch): every 5 s one LIST of all Nodes
  serves the initialisation pass and the NotReady check; every 5 min the
  address re-sync uses that LIST too;
* **watch**: one LIST, then a WATCH whose events feed the cache and the work
  queue; the same periodic passes read the cache. The fake ends a watch
  stream at the ``timeoutSeconds`` the client asked (5-10 min); the bench
  pulls the stream each simulated second, which the fake counts as one
  request per server-side stream, as on a real API server.

Printed: Kubernetes requests by kind, Node objects and bytes received, cloud
calls, CPU seconds of the controller (the fake server's own time
subtracted) and the delay from a Node's join to its initialisation; each
with the ratio watch / polling measured in the same run.

    .venv/bin/python bench/ccm_watch.py [--nodes 2000] [--minutes 10]
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from isthmus.ccm.controllers.lifecycle import LifecycleController
from isthmus.ccm.controllers.node import NodeController
from isthmus.ccm.errors import InstanceNotFound
from isthmus.ccm.kube.informer import Backoff, Informer, NodeCache, WatchSettings, WorkQueue
from isthmus.ccm.kube.nodes import TAINT_UNINITIALIZED, NodeAPI
from isthmus.ccm.openstack.instances import InstanceMetadata, NodeRef
from isthmus.ccm.openstack.model import NodeAddress
from isthmus.ccm.service import Manager, Periods

UNINIT = {"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}


# --- the cloud ------------------------------------------------------------------------------

@dataclass
class FakeCloud:
    """Every server exists and is ACTIVE unless deleted; one call per question."""

    deleted: set[str] = field(default_factory=set)
    calls: int = 0

    def _server(self, ref: NodeRef) -> str:
        self.calls += 1
        return ref.provider_id.rsplit("/", 1)[-1] if ref.provider_id else f"i-{ref.name}"

    def instance_metadata(self, ref: NodeRef) -> InstanceMetadata:
        server = self._server(ref)
        if server in self.deleted:
            raise InstanceNotFound(ref.name)
        number = int(server.rsplit("-", 1)[-1]) if server.rsplit("-", 1)[-1].isdigit() else 0
        return InstanceMetadata(f"openstack://RegionOne/{server}", "m1.large", "az1", "RegionOne",
                                (NodeAddress("InternalIP", f"10.{number // 65536 % 256}.{number // 256 % 256}."
                                                           f"{number % 256}"),))

    def instance_shutdown_if_exists(self, ref: NodeRef) -> bool | None:
        return None if self._server(ref) in self.deleted else False

    def instance_exists(self, ref: NodeRef) -> bool:
        return self._server(ref) not in self.deleted

    def instance_shutdown(self, ref: NodeRef) -> bool:
        return False


# --- the API server, behind the client's REST layer ------------------------------------------

def node_object(i: int, name: str, joined: bool) -> dict[str, Any]:
    """A Node about the size of a real one (~6 KB: conditions, images, nodeInfo)."""
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    pressure = [{"type": t, "status": "False", "reason": f"KubeletHasSufficient{t}", "message": "ok",
                 "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure")]
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    spec: dict[str, Any] = {"taints": [UNINIT]} if joined else {"providerID": f"openstack://RegionOne/i-{i}"}
    if not joined:
        labels.update({"topology.kubernetes.io/region": "RegionOne", "topology.kubernetes.io/zone": "az1",
                       "node.kubernetes.io/instance-type": "m1.large",
                       "failure-domain.beta.kubernetes.io/region": "RegionOne",
                       "failure-domain.beta.kubernetes.io/zone": "az1", "beta.kubernetes.io/instance-type": "m1.large"})
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{i}", "labels": labels,
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                     "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "7800m", "memory": "31Gi", "pods": "110", "ephemeral-storage": "90Gi"},
            "conditions": pressure + [ready],
            "addresses": [] if joined else [{"type": "InternalIP", "address": f"10.0.{i // 256 % 256}.{i % 256}"},
                                            {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": f"m{i}", "systemUUID": f"s{i}", "bootID": f"b{i}", "kernelVersion": "6.1.0",
                         "osImage": "Debian GNU/Linux 12", "containerRuntimeVersion": "containerd://1.7.0",
                         "kubeletVersion": "v1.31.0", "kubeProxyVersion": "v1.31.0", "operatingSystem": "linux",
                         "architecture": "amd64"},
            "images": [{"names": [f"registry.example.com/team/app-{k}@sha256:{k:064x}",
                                  f"registry.example.com/team/app-{k}:v{k}"], "sizeBytes": 100000000 + k}
                       for k in range(20)],
        },
    }


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class Reply:
    """What the client's REST layer returns: preloaded, or a stream of lines (watch)."""

    def __init__(self, status: int, body: bytes = b"", lines: list[bytes] | None = None) -> None:
        self.status, self.reason, self.data = status, "OK" if status < 300 else "Error", body
        self.headers = {"content-type": "application/json"}
        self._lines = lines or []
        self.response = self  # _preload_content=False hands this object to kubernetes.watch

    def read(self) -> bytes:
        return self.data

    def getheader(self, name: str, default: Any = None) -> Any:
        return self.headers.get(name.lower(), default)

    def getheaders(self) -> dict[str, str]:
        return self.headers

    def stream(self, amt: Any = None, decode_content: Any = None) -> Iterator[bytes]:
        yield from self._lines

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


@dataclass
class FakeAPIServer:
    """Nodes with resourceVersions and an event log; counts what the client asked and got."""

    now: float = 0.0
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[tuple[int, bytes]] = field(default_factory=list)  # (resourceVersion, watch event line)
    rv: int = 0
    requests: Counter = field(default_factory=Counter)
    objects: int = 0  # Node objects sent (LIST items + watch events)
    bytes: int = 0
    seconds: float = 0.0  # CPU spent here, subtracted from the controller's
    _stream_until: float = -1.0

    def put(self, name: str, obj: dict[str, Any], kind: str = "MODIFIED") -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.nodes[name] = obj
        self.log.append((self.rv, json.dumps({"type": kind, "object": obj}).encode() + b"\n"))

    def remove(self, name: str) -> None:
        obj = self.nodes.pop(name)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.log.append((self.rv, json.dumps({"type": "DELETED", "object": obj}).encode() + b"\n"))

    def request(self, method: str, url: str, headers: Any = None, body: Any = None, post_params: Any = None,
                _request_timeout: Any = None) -> Reply:
        started = time.process_time()
        try:
            return self._serve(method, url, body)
        finally:
            self.seconds += time.process_time() - started

    def _serve(self, method: str, url: str, body: Any) -> Reply:
        parts = urlsplit(url)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        path = parts.path
        if "/events" in path:
            self.requests[f"{method} events"] += 1
            return Reply(201, json.dumps(body if isinstance(body, dict) else {}).encode())
        name = path.split("/nodes", 1)[1].strip("/").split("/")[0] if "/nodes/" in path else ""
        if method == "GET" and not name and query.get("watch") == "true":
            return self._watch(query)
        if method == "GET" and not name:
            self.requests["LIST nodes"] += 1
            items = list(self.nodes.values())
            self.objects += len(items)
            data = json.dumps({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": str(self.rv)},
                               "items": items}).encode()
            self.bytes += len(data)
            return Reply(200, data)
        self.requests[f"{method} node{'/status' if path.endswith('/status') else ''}"] += 1
        if name not in self.nodes:
            return Reply(404, b'{"kind":"Status","code":404}')
        if method == "GET":
            data = json.dumps(self.nodes[name]).encode()
            self.bytes += len(data)
            return Reply(200, data)
        if method == "DELETE":
            self.remove(name)
            return Reply(200, b'{"kind":"Status","status":"Success"}')
        patch = dict(body)
        patch.get("metadata", {}).pop("resourceVersion", None)  # no concurrent writers here
        self.put(name, merge_patch(self.nodes[name], patch))
        return Reply(200, json.dumps(self.nodes[name]).encode())

    def _watch(self, query: dict[str, str]) -> Reply:
        """Events after the asked resourceVersion; a new server-side stream when the last one timed out."""
        if self.now >= self._stream_until:
            self.requests["WATCH nodes"] += 1
            self._stream_until = self.now + int(query.get("timeoutSeconds", "300"))
        since = int(query.get("resourceVersion") or 0)
        lines = [line for rv, line in self.log if rv > since]
        self.objects += len(lines)
        self.bytes += sum(len(line) for line in lines)
        return Reply(200, lines=lines)


# --- the cluster's life, the same for both modes ----------------------------------------------

@dataclass
class Cluster:
    api: FakeAPIServer
    cloud: FakeCloud
    size: int
    joined: dict[str, float] = field(default_factory=dict)  # name -> simulated join time
    initialised: dict[str, float] = field(default_factory=dict)

    def start(self) -> None:
        for i in range(self.size):
            name = f"node-{i}"
            self.api.put(name, node_object(i, name, joined=False), "ADDED")

    def second(self, t: int) -> None:
        api = self.api
        for name in list(api.nodes):  # kubelet status reports, every 5 min per Node
            if hash(name) % 300 == t % 300:
                self._condition(name, heartbeat=f"2026-01-01T00:{t // 60 % 60:02d}:{t % 60:02d}Z")
        if t % 30 == 17:  # between two polls, as joins are
            i = self.size + t
            name = f"node-{i}"
            self.joined[name] = t
            api.put(name, node_object(i, name, joined=True), "ADDED")
        if t % 60 == 0:
            self._condition(f"node-{t // 60}", ready=False)
        if t % 60 == 0 and t >= 120:
            self._condition(f"node-{t // 60 - 2}", ready=True)
        if t % 300 == 150:
            victim = f"node-{self.size - 1 - t // 300}"
            self.cloud.deleted.add(f"i-{self.size - 1 - t // 300}")
            self._condition(victim, ready=False)
        for name in list(self.joined):
            node = api.nodes.get(name)
            if name not in self.initialised and node and not node["spec"].get("taints"):
                self.initialised[name] = t

    def _condition(self, name: str, ready: bool | None = None, heartbeat: str | None = None) -> None:
        node = self.api.nodes.get(name)
        if node is None:
            return
        node = copy.deepcopy(node)
        for cond in node["status"]["conditions"]:
            if heartbeat:
                cond["lastHeartbeatTime"] = heartbeat
            if ready is not None and cond["type"] == "Ready":
                cond["status"] = "True" if ready else "False"
        self.api.put(name, node)


# --- the two modes ----------------------------------------------------------------------------

@dataclass
class Result:
    mode: str
    requests: Counter
    objects: int
    bytes: int
    cloud_calls: int
    cpu: float
    init_delay: list[float]


def node_api(api: FakeAPIServer) -> NodeAPI:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = "http://fake"
    api_client = client.ApiClient(cfg)
    # The client's transport replaced by the simulated API (kubernetes types it as its RESTClientObject).
    api_client.rest_client = api  # type: ignore[assignment]
    return NodeAPI(client.CoreV1Api(api_client))


def run_mode(mode: str, size: int, minutes: int) -> Result:
    api, cloud = FakeAPIServer(), FakeCloud()
    cluster = Cluster(api, cloud, size)
    cluster.start()
    nodes = node_api(api)
    clock = lambda: api.now  # noqa: E731 - simulated seconds
    node_ctl = NodeController(nodes, cloud, Backoff(clock=clock))
    life = LifecycleController(nodes, cloud)
    periods = Periods()
    cpu_start = time.process_time()
    if mode == "polling":
        last: dict[str, float] = {}
        for t in range(minutes * 60):
            api.now = float(t)
            cluster.second(t)
            due = [what for what, period in (("sync", 5.0), ("monitor", periods.node_monitor),
                                             ("addresses", periods.node_status_update))
                   if what not in last or t - last[what] >= period]
            if not due:
                continue
            views = nodes.list()
            for what in due:
                last[what] = t
                {"sync": node_ctl.sync, "monitor": life.monitor, "addresses": node_ctl.update_addresses}[what](views)
    else:
        cache, queue = NodeCache(), WorkQueue(Backoff(clock=clock), clock=clock)
        manager = Manager(cache, queue, node_ctl, life, periods, clock=clock)
        informer = Informer(nodes, cache, queue.add, WatchSettings())
        informer.relist()
        for t in range(minutes * 60):
            api.now = float(t)
            cluster.second(t)
            informer.watch_once()  # what arrived on the stream this second
            manager.step(wait=0.0, budget=1e9)
    cpu = time.process_time() - cpu_start - api.seconds
    delays = [cluster.initialised[n] - j for n, j in cluster.joined.items() if n in cluster.initialised]
    return Result(mode, api.requests, api.objects, api.bytes, cloud.calls, cpu, delays)


def ratio(watch: float, polling: float) -> str:
    if polling == 0:
        return "–" if watch == 0 else "∞"
    return f"{watch / polling:.3f}×"


def table(polling: Result, watch: Result) -> str:
    kinds = sorted(set(polling.requests) | set(watch.requests))
    rows: list[tuple[str, float, float]] = [(f"Kubernetes requests: {k}", polling.requests[k], watch.requests[k])
                                            for k in kinds]
    total_p, total_w = sum(polling.requests.values()), sum(watch.requests.values())
    rows += [
        ("Kubernetes requests: total", total_p, total_w),
        ("Node objects received", polling.objects, watch.objects),
        ("MB received", round(polling.bytes / 1e6, 1), round(watch.bytes / 1e6, 1)),
        ("OpenStack calls", polling.cloud_calls, watch.cloud_calls),
        ("controller CPU s", round(polling.cpu, 2), round(watch.cpu, 2)),
        ("join → initialised, mean s", round(sum(polling.init_delay) / max(1, len(polling.init_delay)), 1),
         round(sum(watch.init_delay) / max(1, len(watch.init_delay)), 1)),
    ]
    out = ["| | polling (every 5 s) | watch | watch / polling |", "|---|---:|---:|---:|"]
    out += [f"| {name} | {p} | {w} | {ratio(float(w), float(p))} |" for name, p, w in rows]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--minutes", type=int, default=10)
    args = parser.parse_args()
    polling = run_mode("polling", args.nodes, args.minutes)
    watch = run_mode("watch", args.nodes, args.minutes)
    print(f"{args.nodes} nodes, {args.minutes} simulated minutes")
    print(table(polling, watch))


if __name__ == "__main__":
    main()
