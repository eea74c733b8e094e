"""Repository behaviour on every backend: coalescing, filters, paging, delete, redo."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from isthmus.jobs import (
    HandlerRegistry,
    InvalidJobRequest,
    InvalidJobState,
    JobFilter,
    JobNotFound,
    JobStatus,
    JobStore,
    ManualClock,
    RetryPolicy,
)

from .helpers import make_runner


def _registry(calls: list[Any] | None = None) -> HandlerRegistry:
    registry = HandlerRegistry()
    registry.register("sync", lambda ctx: calls.append(ctx.payload.get("v")) if calls is not None else None)
    return registry


def test_enqueue_creates_a_new_job(store: JobStore, clock: ManualClock) -> None:
    job = store.enqueue("sync", "net-1", project_id="p1", payload={"pod": "RegionOne"})
    assert job.status is JobStatus.NEW
    assert (job.job_type, job.resource_id, job.project_id) == ("sync", "net-1", "p1")
    assert dict(job.payload) == {"pod": "RegionOne"}
    assert job.attempt == 0 and job.failures == 0 and job.rerun is False
    assert job.run_after == clock.now() and job.created_at == clock.now()
    assert store.get(job.id) == job


def test_enqueue_coalesces_pending_jobs_per_key(store: JobStore) -> None:
    first = store.enqueue("sync", "net-1", payload={"v": 1})
    again = store.enqueue("sync", "net-1", payload={"v": 2})
    other_type = store.enqueue("delete", "net-1")
    other_resource = store.enqueue("sync", "net-2")
    assert again.id == first.id and dict(again.payload) == {"v": 2}
    assert len({first.id, other_type.id, other_resource.id}) == 3
    assert len(store.list()) == 3
    assert store.counts()[JobStatus.NEW] == 3


def test_enqueue_while_running_yields_exactly_one_follow_up(store: JobStore) -> None:
    calls: list[int] = []
    runner = make_runner(store, _registry(calls))
    store.enqueue("sync", "net-1", payload={"v": 1})
    [claim] = runner.claim(10)
    for v in (2, 3, 4):  # three events while the first run is in progress
        assert store.enqueue("sync", "net-1", payload={"v": v}).status is JobStatus.RUNNING
    assert store.get(claim.job.id).rerun is True
    after_first = runner.run(claim)
    assert after_first is not None and after_first.status is JobStatus.NEW and after_first.attempt == 0
    assert runner.run_due() == 1  # the single follow-up
    assert runner.run_due() == 0
    assert calls == [1, 4]  # the follow-up saw the newest payload
    assert store.get(claim.job.id).status is JobStatus.SUCCESS


def test_waiting_names_the_keys_whose_run_is_still_to_start(store: JobStore) -> None:
    runner = make_runner(store, _registry())
    for key in ("running", "running-again", "done", "new"):
        store.enqueue("sync", key)
    store.enqueue("other", "other-type")
    assert runner.run_due() == 4  # every "sync" key ran once
    store.enqueue("sync", "running")
    store.enqueue("sync", "running-again")
    claims = {c.job.resource_id: c for c in runner.claim(10)}
    assert set(claims) == {"running", "running-again"}
    store.enqueue("sync", "running-again")  # an event during the run: a follow-up run
    store.enqueue("sync", "new")
    keys = ["running", "running-again", "done", "new", "other-type", "unknown"]
    # A key in the middle of its run read before the event it serves; the follow-up
    # and a job not yet claimed will read afresh.
    assert store.waiting("sync", keys) == {"running-again", "new"}
    assert store.waiting("sync", keys, or_running=True) == {"running", "running-again", "new"}
    assert store.waiting("sync", []) == set()
    assert store.waiting("other", keys) == {"other-type"}  # no handler: never ran


def test_waiting_since_names_the_keys_whose_run_ended_since(store: JobStore, clock: ManualClock) -> None:
    runner = make_runner(store, _registry())
    store.enqueue("sync", "early")
    runner.run_due()
    since = clock.advance(5)
    store.enqueue("sync", "late")
    runner.run_due()
    assert store.waiting("sync", ["early", "late"]) == set()
    assert store.waiting("sync", ["early", "late"], finished_since=since) == {"late"}


def test_waiting_asks_in_chunks(store: JobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("isthmus.jobs.store.WAITING_CHUNK", 2)
    for key in ("a", "b", "c", "d", "e"):
        store.enqueue("sync", key)
    assert store.waiting("sync", ["e", "d", "c", "b", "a", "z"]) == {"a", "b", "c", "d", "e"}


def test_enqueue_after_success_rearms_the_same_job(store: JobStore) -> None:
    runner = make_runner(store, _registry())
    job = store.enqueue("sync", "net-1")
    runner.run_due()
    assert store.get(job.id).status is JobStatus.SUCCESS
    rearmed = store.enqueue("sync", "net-1")
    assert rearmed.id == job.id and rearmed.status is JobStatus.NEW
    assert runner.run_due() == 1


def test_filters(store: JobStore) -> None:
    runner = make_runner(store, _registry())
    store.enqueue("sync", "net-1", project_id="p1")
    runner.run_due()  # net-1 -> SUCCESS
    store.enqueue("sync", "net-2", project_id="p1")
    store.enqueue("delete", "port-1", project_id="p2")
    store.enqueue("delete", "port-2", project_id="p1")

    def keys(**kw) -> set[tuple[str, str]]:
        return {(j.job_type, j.resource_id) for j in store.list(JobFilter(**kw))}

    assert keys(status="success") == {("sync", "net-1")}
    assert keys(status="NEW") == keys(status="new") == {("sync", "net-2"), ("delete", "port-1"), ("delete", "port-2")}
    assert keys(job_type="delete") == {("delete", "port-1"), ("delete", "port-2")}
    assert keys(project_id="p2") == {("delete", "port-1")}
    assert keys(resource_id="net-2") == {("sync", "net-2")}
    assert keys(job_type="delete", project_id="p1") == {("delete", "port-2")}
    assert keys(job_type="nothing") == set()
    assert store.counts(JobFilter(project_id="p1")) == {
        JobStatus.NEW: 2, JobStatus.RUNNING: 0, JobStatus.SUCCESS: 1, JobStatus.FAIL: 0,
    }


def test_list_pages_newest_first(store: JobStore, clock: ManualClock) -> None:
    ids = []
    for n in range(5):
        ids.append(store.enqueue("sync", f"net-{n}").id)
        clock.advance(1)
    page1 = store.list(limit=2)
    page2 = store.list(limit=2, marker=page1[-1].id)
    page3 = store.list(limit=2, marker=page2[-1].id)
    assert [j.id for j in page1 + page2 + page3] == list(reversed(ids))
    with pytest.raises(InvalidJobRequest, match="marker"):
        store.list(marker="no-such-job")
    with pytest.raises(InvalidJobRequest, match="limit"):
        store.list(limit=0)


def test_paging_is_stable_for_equal_timestamps(store: JobStore) -> None:
    ids = {store.enqueue("sync", f"net-{n}").id for n in range(5)}  # same clock instant
    seen, marker = [], None
    while page := store.list(limit=2, marker=marker):
        seen += [j.id for j in page]
        marker = page[-1].id
    assert sorted(seen) == sorted(ids) and len(seen) == 5


def test_get_and_delete(store: JobStore) -> None:
    runner = make_runner(store, _registry())
    with pytest.raises(JobNotFound):
        store.get("missing")
    with pytest.raises(JobNotFound):
        store.delete("missing")
    pending = store.enqueue("sync", "net-1")
    store.delete(pending.id)
    with pytest.raises(JobNotFound):
        store.get(pending.id)
    running = store.enqueue("sync", "net-2")
    [claim] = runner.claim(1)
    with pytest.raises(InvalidJobState) as info:
        store.delete(running.id)
    assert info.value.status == "RUNNING"
    runner.run(claim)
    store.delete(running.id)  # SUCCESS rows may be deleted
    assert store.list() == []


def test_redo(store: JobStore, clock: ManualClock) -> None:
    registry = HandlerRegistry()
    outcomes = iter([ValueError("region said no"), None])

    def flaky(ctx) -> None:
        exc = next(outcomes)
        if exc:
            raise exc

    registry.register("sync", flaky)
    runner = make_runner(store, registry, policy=RetryPolicy(max_attempts=1, jitter=0))
    job = store.enqueue("sync", "net-1")
    runner.run_due()
    failed = store.get(job.id)
    assert failed.status is JobStatus.FAIL and failed.failures == 1
    assert failed.last_error == "ValueError: region said no"
    redone = store.redo(job.id)
    assert redone.status is JobStatus.NEW and redone.failures == 0 and redone.attempt == 0
    assert redone.run_after == clock.now() and redone.id == job.id
    assert runner.run_due() == 1
    done = store.get(job.id)
    assert done.status is JobStatus.SUCCESS and done.last_error is None
    with pytest.raises(InvalidJobState):
        store.redo(job.id)  # SUCCESS cannot be redone (enqueue re-arms it instead)
    with pytest.raises(JobNotFound):
        store.redo("missing")


def test_purge_succeeded(store: JobStore, clock: ManualClock) -> None:
    runner = make_runner(store, _registry())
    old = store.enqueue("sync", "net-old")
    runner.run_due()
    clock.advance(3600)
    store.enqueue("sync", "net-new")
    runner.run_due()
    store.enqueue("sync", "net-pending")
    assert store.purge_succeeded(timedelta(minutes=30)) == 1
    assert {j.resource_id for j in store.list()} == {"net-new", "net-pending"}
    with pytest.raises(JobNotFound):
        store.get(old.id)


def test_to_dict_is_json_friendly(store: JobStore) -> None:
    job = store.enqueue("sync", "net-1", project_id="p1", payload={"pods": ["a", "b"]})
    data = json.loads(json.dumps(job.to_dict()))
    assert data["type"] == "sync" and data["status"] == "NEW" and data["payload"] == {"pods": ["a", "b"]}
    assert "lease_token" not in data
