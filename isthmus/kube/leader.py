"""Leader election on a ``coordination.k8s.io/v1`` Lease (client-go's rules, simplified).

Only the holder of the Lease runs the controllers, so two replicas are safe.
Expiry is judged by *local* time since the Lease record last changed (not by
the remote timestamps), so clock skew between replicas does not matter.
Writes carry the read resourceVersion, so two candidates cannot both win.
A leader that could not renew within ``renew_deadline`` stops acting as one.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LOG = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"


def _micro_time(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaseElector:
    coordination: Any  # kubernetes.client.CoordinationV1Api
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    # Each Lease call must end well inside renew_deadline, or a hung API server
    # would keep a leader that can no longer prove it is one.
    request_timeout: float = 5.0
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)
    _observed: tuple[Any, ...] | None = field(default=None, init=False)  # last seen record
    _observed_at: float = field(default=0.0, init=False)
    _renewed_at: float | None = field(default=None, init=False)  # local time of our last success

    def is_leader(self) -> bool:
        return self._renewed_at is not None and self.clock() - self._renewed_at < self.renew_deadline

    def try_acquire_or_renew(self) -> bool:
        """One election round; True if we hold the Lease afterwards."""
        from kubernetes.client.exceptions import ApiException

        try:
            ok = self._round()
        except ApiException as exc:
            if exc.status != 409:
                LOG.warning("lease %s/%s: %s %s", self.namespace, self.name, exc.status, exc.reason)
            ok = False
        if ok:
            if not self.is_leader():
                LOG.info("lease %s/%s: %s became leader", self.namespace, self.name, self.identity)
            self._renewed_at = self.clock()
        return self.is_leader()

    def release(self) -> None:
        """Give the Lease up on clean shutdown so a standby takes over at once."""
        if not self.is_leader():
            return
        from kubernetes.client.exceptions import ApiException

        now = _micro_time(self.wall_clock())
        patch = {"spec": {"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": now}}
        try:
            self.coordination.patch_namespaced_lease(self.name, self.namespace, patch, _content_type=MERGE_PATCH,
                                                     _request_timeout=self.request_timeout)
        except ApiException as exc:
            LOG.warning("lease %s/%s: release failed: %s", self.namespace, self.name, exc.status)
        self._renewed_at = None

    def _round(self) -> bool:
        from kubernetes.client.exceptions import ApiException

        now = _micro_time(self.wall_clock())
        try:
            lease = self.coordination.read_namespaced_lease(self.name, self.namespace,
                                                             _request_timeout=self.request_timeout)
        except ApiException as exc:
            if exc.status != 404:
                raise
            self._create(now)
            return True
        spec = lease.spec
        record = (spec.holder_identity, spec.renew_time, spec.lease_transitions, spec.lease_duration_seconds)
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        holder = spec.holder_identity or ""
        duration = spec.lease_duration_seconds or self.lease_duration
        if holder and holder != self.identity and self.clock() - self._observed_at < duration:
            return False  # someone else holds a live lease
        patch: dict[str, Any] = {
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {"holderIdentity": self.identity, "renewTime": now,
                     "leaseDurationSeconds": int(self.lease_duration)},
        }
        if holder != self.identity:
            patch["spec"]["acquireTime"] = now
            patch["spec"]["leaseTransitions"] = (spec.lease_transitions or 0) + 1
        if not lease.metadata.resource_version:
            del patch["metadata"]
        self.coordination.patch_namespaced_lease(self.name, self.namespace, patch, _content_type=MERGE_PATCH,
                                                     _request_timeout=self.request_timeout)
        return True

    def _create(self, now: str) -> None:
        # A plain dict: MicroTime must keep its 6 fraction digits, which a
        # datetime serialised by the client would drop when they are zero.
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration),
                     "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
        }
        self.coordination.create_namespaced_lease(self.namespace, body, _request_timeout=self.request_timeout)
