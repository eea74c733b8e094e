"""The real kube-apiserver tier: what the kmock emulator cannot show (the objects'
generation, among others). Runs when KUBEBUILDER_ASSETS names a directory with ``etcd`` and
``kube-apiserver`` binaries (``setup-envtest use`` downloads them), as controller-runtime's
envtest runs them: etcd and kube-apiserver on loopback, no controller-manager, no kubelet.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from isthmus.operator import crds
from tests.unit.operator.conftest import make_cloud

ASSETS = os.environ.get("KUBEBUILDER_ASSETS", "")
pytestmark = [
    pytest.mark.skipif(
        not (ASSETS and Path(ASSETS, "kube-apiserver").exists() and Path(ASSETS, "etcd").exists()),
        reason="needs KUBEBUILDER_ASSETS with etcd and kube-apiserver binaries (none can be installed here)"),
    pytest.mark.component,  # a real kube-apiserver and etcd (tests/tiers.py)
]

TOKEN = "isthmus-test-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ApiServer:
    def __init__(self, url: str) -> None:
        self.url = url
        self.context = ssl.create_default_context()
        self.context.check_hostname = False
        self.context.verify_mode = ssl.CERT_NONE

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": f"Bearer {TOKEN}", "Content-Type": content_type})
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    work = tmp_path_factory.mktemp("apiserver")
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=sa",
                    "-keyout", str(work / "sa.key"), "-out", str(work / "sa.crt")], check=True, capture_output=True)
    (work / "tokens.csv").write_text(f'{TOKEN},admin,admin,"system:masters"\n')
    etcd = subprocess.Popen([str(Path(ASSETS, "etcd")), "--data-dir", str(work / "etcd"),
                             "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--listen-peer-urls", f"http://127.0.0.1:{peer_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    api = subprocess.Popen([str(Path(ASSETS, "kube-apiserver")), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                            f"--secure-port={api_port}", "--bind-address=127.0.0.1", f"--cert-dir={work / 'certs'}",
                            f"--token-auth-file={work / 'tokens.csv'}", "--authorization-mode=RBAC",
                            f"--service-account-issuer=https://127.0.0.1:{api_port}",
                            f"--service-account-key-file={work / 'sa.crt'}",
                            f"--service-account-signing-key-file={work / 'sa.key'}",
                            "--service-cluster-ip-range=10.0.0.0/24",
                            "--disable-admission-plugins=ServiceAccount"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = ApiServer(f"https://127.0.0.1:{api_port}")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if server.request("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("kube-apiserver did not become ready")
        for crd in crds.all_crds():
            status, body = server.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            assert status == 201, body
        yield server
    finally:
        for proc in (api, etcd):
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


def crd_established(server: ApiServer, name: str) -> bool:
    _, body = server.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    return any(c["type"] == "Established" and c["status"] == "True"
               for c in body.get("status", {}).get("conditions", []))


def test_01_crds_established(apiserver: ApiServer) -> None:
    deadline = time.monotonic() + 30
    names = [crd["metadata"]["name"] for crd in crds.all_crds()]
    while time.monotonic() < deadline and not all(crd_established(apiserver, n) for n in names):
        time.sleep(0.5)
    assert all(crd_established(apiserver, n) for n in names)


MRC = "/apis/isthmus.dev/v1alpha1/namespaces/default/multiregionclouds"

REJECTED = [
    ("duplicate region", {"regions": [{"name": "RegionOne"}, {"name": "RegionOne"}]}),
    ("central name", {"regions": [{"name": "CentralRegion"}]}),
    ("external without urls", {"regions": [{"name": "R1", "nova": {"enabled": True, "mode": "External"}}]}),
    ("negative replicas", {"regions": [{"name": "R1", "neutron": {"replicas": -1}}]}),
]


@pytest.mark.parametrize("overrides", [c[1] for c in REJECTED], ids=[c[0] for c in REJECTED])
def test_11_schema_and_cel_reject(apiserver: ApiServer, overrides: dict[str, Any]) -> None:
    body = make_cloud(name="bad", namespace="default", **overrides)
    body["metadata"].pop("uid")
    status, answer = apiserver.request("POST", MRC, body)
    assert status == 422, answer


def test_defaults_generation_and_immutable_region_name(apiserver: ApiServer) -> None:
    body = make_cloud(name="good", namespace="default")
    body["metadata"].pop("uid")
    status, created = apiserver.request("POST", MRC, body)
    assert status == 201, created
    assert created["spec"]["centralNetwork"]["regionName"] == "CentralRegion"  # defaulted by the server
    assert created["metadata"]["generation"] == 1
    status, patched = apiserver.request("PATCH", f"{MRC}/good", {"spec": {"identity": {"replicas": 3}}},
                                        "application/merge-patch+json")
    assert status == 200 and patched["metadata"]["generation"] == 2
    status, patched = apiserver.request("PATCH", f"{MRC}/good/status", {"status": {"observedGeneration": 2}},
                                        "application/merge-patch+json")
    assert status == 200 and patched["metadata"]["generation"] == 2  # status writes do not bump it
    region = {"apiVersion": "isthmus.dev/v1alpha1", "kind": "Region", "metadata": {"name": "r1"},
              "spec": {"secret": "s", "name": "RegionOne", "keystoneRef": "ids"}}
    path = "/apis/isthmus.dev/v1alpha1/namespaces/default/regions"
    assert apiserver.request("POST", path, region)[0] == 201
    status, _ = apiserver.request("PATCH", f"{path}/r1", {"spec": {"name": "RegionX"}}, "application/merge-patch+json")
    assert status == 422
