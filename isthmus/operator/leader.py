"""Leader election for isthmus-operator replicas: one Lease, one acting replica.

kopf's peering only pauses operators of lower priority (replicas of equal
priority all pause), so it elects nothing. Like controller-runtime, a replica
takes the ``coordination.k8s.io`` Lease (the same elector as the CCM's,
:mod:`isthmus.kube.leader`) before kopf starts any watch: kopf runs its startup
handlers first, so a standby waits there, alive (kopf's liveness endpoint
answers meanwhile) but reconciling nothing. The leader renews in the
background; one that cannot renew within the deadline exits (its pod restarts
as a standby) rather than act beside a new leader. A clean stop (the pod
deleted, a rolling update) releases the Lease, so the standby takes over at
once instead of after the lease duration.

Settings: ``ISTHMUS_OPERATOR_LEASE`` (``namespace/name``; unset: no election,
one replica), ``POD_NAME`` (the identity; the host name otherwise).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from isthmus.kube.leader import LeaseElector

LOG = logging.getLogger(__name__)
LEASE_ENV = "ISTHMUS_OPERATOR_LEASE"
RETRY_SECONDS = 2.0


def kube_api_client() -> Any:
    """A ``kubernetes`` client with the operator's credentials: the in-cluster service
    account, else the kubeconfig, else ISTHMUS_OPERATOR_SERVER (the kmock emulator)."""
    from kubernetes import client, config

    server = os.environ.get("ISTHMUS_OPERATOR_SERVER")
    if server:
        configuration = client.Configuration()
        configuration.host = server
        return client.ApiClient(configuration)
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


def identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"


def _exit_process() -> None:
    LOG.error("lost the operator's Lease: exiting so that this replica restarts as a standby")
    os._exit(1)  # noqa: SLF001 - a deposed leader must stop at once, mid-reconcile included


@dataclass
class Leadership:
    elector: LeaseElector
    on_lost: Callable[[], None] = _exit_process
    retry: float = RETRY_SECONDS
    _renewer: asyncio.Task | None = field(default=None, init=False)

    @classmethod
    def from_env(cls) -> Leadership | None:
        where = os.environ.get(LEASE_ENV, "").strip()
        if not where:
            return None
        namespace, _, name = where.rpartition("/")
        if not namespace or not name:
            raise ValueError(f"{LEASE_ENV}: {where!r} is not namespace/name")
        from kubernetes import client

        return cls(LeaseElector(client.CoordinationV1Api(kube_api_client()), name, namespace, identity()))

    async def _round(self) -> bool:
        return await asyncio.to_thread(self.elector.try_acquire_or_renew)

    async def acquire(self) -> None:
        """Wait until this replica leads, then keep renewing in the background."""
        where = f"{self.elector.namespace}/{self.elector.name}"
        LOG.info("waiting for the Lease %s as %s", where, self.elector.identity)
        while not await self._round():
            await asyncio.sleep(self.retry)
        LOG.info("holding the Lease %s as %s: reconciling", where, self.elector.identity)
        self._renewer = asyncio.create_task(self._renew(), name="isthmus-operator-lease")

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.retry)
            if not await self._round():
                self.on_lost()
                return

    async def release(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None
        await asyncio.to_thread(self.elector.release)
