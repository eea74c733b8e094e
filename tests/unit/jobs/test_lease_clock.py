"""Leases judged by one clock, and taken over only after a grace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.engine import Engine

from isthmus.jobs import DatabaseClock, JobStatus, JobStore, Leases, ManualClock, RetryPolicy

POLICIES = {"sync": RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=1.0, jitter=0.0)}


def test_an_expired_lease_is_taken_over_only_after_the_grace(store: JobStore, clock: ManualClock) -> None:
    """Before: taken over the instant it expired, while a call its holder started
    just before expiry could still land after the new runner's."""
    job = store.enqueue("sync", "net-1")
    holder = Leases(store.engine, clock, "a", lease_seconds=30, takeover_grace=20)
    rescuer = Leases(store.engine, clock, "b", lease_seconds=30, takeover_grace=20)
    assert [c.job.id for c in holder.claim(POLICIES, 1)] == [job.id]
    clock.advance(31)  # expired, within the grace
    assert rescuer.claim(POLICIES, 1) == []
    clock.advance(20)
    (taken,) = rescuer.claim(POLICIES, 1)
    assert (taken.job.id, taken.job.lease_owner, taken.job.status) == (job.id, "b", JobStatus.RUNNING)


def test_a_negative_grace_is_refused(engine: Engine, clock: ManualClock) -> None:
    with pytest.raises(ValueError):
        Leases(engine, clock, "a", lease_seconds=30, takeover_grace=-1)


class _Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_database_clock_follows_the_server_not_this_host(monkeypatch: pytest.MonkeyPatch,
                                                             engine: Engine) -> None:
    """A worker whose own clock runs an hour ahead still sees the server's time,
    so it cannot take a lease that is live by the server's clock."""
    server = datetime(2031, 5, 1, 12, 0, tzinfo=UTC)
    readings: list[datetime] = []

    def read_server(_engine):
        readings.append(server)
        return server

    monkeypatch.setattr("isthmus.db.database_now", read_server)
    monotonic = _Monotonic()
    clock = DatabaseClock(engine, refresh=60, monotonic=monotonic)
    assert clock.now() == server
    monotonic.now += 5
    assert clock.now() == server + timedelta(seconds=5) and len(readings) == 1  # carried on the monotonic clock
    server += timedelta(seconds=65)
    monotonic.now += 60
    assert clock.now() == server and len(readings) == 2  # read again after ``refresh``


def test_an_unreadable_database_clock_carries_the_last_reading_on(monkeypatch: pytest.MonkeyPatch,
                                                                   engine: Engine) -> None:
    server = datetime(2031, 5, 1, 12, 0, tzinfo=UTC)
    answers = [server]

    def read_server(_engine):
        if not answers:
            raise OSError("database unreachable")
        return answers.pop()

    monkeypatch.setattr("isthmus.db.database_now", read_server)
    monotonic = _Monotonic()
    clock = DatabaseClock(engine, refresh=10, monotonic=monotonic)
    clock.now()
    monotonic.now += 30
    assert clock.now() == server + timedelta(seconds=30)


def test_a_store_uses_the_database_clock_unless_given_one(engine: Engine) -> None:
    assert isinstance(JobStore(engine).clock, DatabaseClock)
    assert isinstance(JobStore(engine, ManualClock()).clock, ManualClock)


def test_every_backend_answers_its_clock_in_utc(engine: Engine) -> None:
    from isthmus.db import database_now

    # The servers run on this machine: their clock is this host's, whatever their time zone.
    assert abs((database_now(engine) - datetime.now(UTC)).total_seconds()) < 5
