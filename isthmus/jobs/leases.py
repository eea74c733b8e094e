"""Worker-side transitions: claim, renew, finish and release leases.

A lease is (owner, token, expiry) on the job row. Every call after the claim
is guarded by the token, so a worker whose lease expired and was taken over
cannot overwrite the new runner's outcome: it gets :class:`LeaseLost`.

Times come from the store's clock (the database server's, see clock.py). An
expired lease is taken over only ``takeover_grace`` seconds after its expiry:
its old holder stops before its next call once the lease has expired, but a
call it started just before may still land; the grace (at least the longest
call a handler makes) lets that call end first.

Jobs of a batch type are claimed as a group (:meth:`Leases.claim_batch`), each
with its own lease, once the oldest has been due for the type's window.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from isthmus.db import read_tx, retry_transient, skip_locked_supported, write_tx
from isthmus.jobs import metrics, rows, transitions
from isthmus.jobs.backoff import RetryPolicy
from isthmus.jobs.clock import Clock
from isthmus.jobs.errors import LeaseLost
from isthmus.jobs.models import Job, JobStatus
from isthmus.jobs.schema import from_db, jobs, row_to_job, to_db

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claim:
    """A job this worker runs, as it was right after the claim."""

    job: Job

    @property
    def token(self) -> str:
        assert self.job.lease_token is not None
        return self.job.lease_token


class Leases:
    def __init__(self, engine: Engine, clock: Clock, owner: str, lease_seconds: float,
                 takeover_grace: float = 0.0) -> None:
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be > 0")
        if takeover_grace < 0:
            raise ValueError("takeover_grace must be >= 0")
        self.engine = engine
        self.clock = clock
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.takeover_grace = timedelta(seconds=takeover_grace)

    # -- claim -----------------------------------------------------------------

    def claim(self, policies: Mapping[str, RetryPolicy], limit: int) -> list[Claim]:
        """Take up to ``limit`` due jobs of the given types (type -> retry policy)."""
        if limit <= 0 or not policies:
            return []
        # Cheap read first: an idle poll then never takes SQLite's write lock.
        if not self._any_claimable(policies):
            return []
        return retry_transient(lambda: self._claim_once(policies, limit))

    def claim_batch(self, job_type: str, policy: RetryPolicy, max_size: int, window: float) -> list[Claim]:
        """Take up to ``max_size`` due jobs of one type for one batch run, but only once
        the oldest of them has been due ``window`` seconds (database clock).

        Before that nothing is taken, so the jobs of a burst of events accumulate
        into one batch instead of the first event's job running alone. Each job
        gets its own lease, with the same compare-and-set as :meth:`claim`.
        """
        if max_size <= 0:
            return []
        # Cheap read first, as in claim(): waiting or idle, no write lock is taken.
        ripe_at = self.batch_ripe_at(job_type, window)
        if ripe_at is None or ripe_at > self.clock.now():
            return []
        return retry_transient(lambda: self._claim_once({job_type: policy}, max_size, window))

    def batch_ripe_at(self, job_type: str, window: float) -> datetime | None:
        """When the type's next batch may be claimed: its oldest claimable job's due
        time plus ``window``; None if none is claimable."""
        now = self.clock.now()
        query = sa.select(sa.func.min(jobs.c.run_after)).where(self._claimable_clause([job_type], now))
        with read_tx(self.engine) as conn:
            oldest = conn.execute(query).scalar()
        return None if oldest is None else from_db(oldest) + timedelta(seconds=window)

    def _claimable_clause(self, types: list[str], now: datetime) -> sa.ColumnElement[bool]:
        db_now = to_db(now)
        due = sa.and_(jobs.c.status == JobStatus.NEW.value, jobs.c.run_after <= db_now)
        orphaned = sa.and_(
            jobs.c.status == JobStatus.RUNNING.value,
            sa.or_(jobs.c.lease_expires_at.is_(None),
                   jobs.c.lease_expires_at < to_db(now - self.takeover_grace)),
        )
        return sa.and_(jobs.c.job_type.in_(types), sa.or_(due, orphaned))

    def _any_claimable(self, policies: Mapping[str, RetryPolicy]) -> bool:
        query = sa.select(jobs.c.id).where(self._claimable_clause(sorted(policies), self.clock.now())).limit(1)
        with read_tx(self.engine) as conn:
            return conn.execute(query).first() is not None

    def _claim_once(
        self, policies: Mapping[str, RetryPolicy], limit: int, window: float | None = None
    ) -> list[Claim]:
        """Claim in one transaction. With a ``window`` (a batch), nothing unless the
        oldest row found is past it: the rows the read saw may have gone to another
        worker, leaving only younger ones that must go on waiting."""
        claims: list[Claim] = []
        taken_over: list[str] = []
        with write_tx(self.engine) as conn:
            now = self.clock.now()
            query = sa.select(jobs).where(self._claimable_clause(sorted(policies), now))
            query = query.order_by(jobs.c.run_after, jobs.c.created_at).limit(limit)
            if skip_locked_supported(conn.dialect):
                # Concurrent claimers skip each other's rows instead of queueing on them.
                query = query.with_for_update(skip_locked=True)
            found = [row_to_job(row) for row in conn.execute(query).mappings().all()]
            if window is not None and found and found[0].run_after + timedelta(seconds=window) > now:
                return []
            for job in found:
                values = transitions.on_claim(
                    job, self.owner, now, self.lease_seconds, policies[job.job_type]
                )
                # The compare-and-set is what guarantees one runner per key.
                if not rows.cas(conn, job, values, now):
                    continue
                claimed = rows.fetch(conn, job.id)
                if job.status is JobStatus.RUNNING:
                    LOG.warning("job %s: lease of %s expired, taken over", job.id, job.lease_owner)
                    taken_over.append(job.job_type)
                if claimed is not None and claimed.status is JobStatus.RUNNING:
                    claims.append(Claim(claimed))
                else:
                    LOG.warning("job %s (%s) failed: %s", job.id, job.job_type, values.get("last_error"))
        for job_type in taken_over:  # counted once committed: a retried transaction counts once
            metrics.observe_takeover(job_type)
        return claims

    # -- while running -----------------------------------------------------------

    def renew(self, claim: Claim) -> bool:
        """Extend the lease; False if it was lost (the handler should stop)."""
        try:
            self._guarded(claim, lambda job, now: transitions.on_renew(now, self.lease_seconds))
            return True
        except LeaseLost:
            return False

    # -- outcomes ------------------------------------------------------------------

    def succeed(self, claim: Claim) -> Job:
        return self._guarded(claim, transitions.on_success)

    def retry_later(self, claim: Claim, delay: float, reason: str) -> Job:
        return self._guarded(
            claim, lambda job, now: transitions.on_retry_later(job, now, delay, reason)
        )

    def fail(
        self,
        claim: Claim,
        error: str,
        policy: RetryPolicy,
        *,
        permanent: bool = False,
        rand: Callable[[], float] | None = None,
    ) -> Job:
        return self._guarded(
            claim,
            lambda job, now: transitions.on_error(job, now, error, policy, permanent=permanent, rand=rand),
        )

    def release(self, claim: Claim) -> bool:
        """Hand the job back unfinished (shutdown); False if it was already lost."""
        try:
            self._guarded(claim, lambda job, now: transitions.on_release(now))
            return True
        except LeaseLost:
            return False

    def _guarded(self, claim: Claim, mutation: rows.Mutation) -> Job:
        def checked(job: Job, now: datetime) -> transitions.Values:
            if job.status is not JobStatus.RUNNING or job.lease_token != claim.token:
                raise LeaseLost(f"job {job.id}: lease of {self.owner} was taken over")
            values = mutation(job, now)
            assert values is not None
            return values

        return rows.mutate(self.engine, self.clock, claim.job.id, checked)
