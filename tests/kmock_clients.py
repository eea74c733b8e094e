"""The production Kubernetes client (``kubernetes.client``) pointed at a kmock emulator,
as the CCM tests use it: the same client a real cluster gets, another server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def api_client(server: Any) -> Any:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = str(server.url).rstrip("/")
    return client.ApiClient(cfg)


def core_api(server: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api_client(server))


def write_kubeconfig(server: Any, path: Path) -> Path:
    """A kubeconfig naming the emulator, for the ``isthmus-ccm`` process (its token is unused)."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "kmock",
        "clusters": [{"name": "kmock", "cluster": {"server": str(server.url).rstrip("/")}}],
        "users": [{"name": "ccm", "user": {"token": "unused"}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "ccm"}}],
    }))
    return path
