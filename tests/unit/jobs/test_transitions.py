"""The state machine and backoff as pure functions (no database)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from isthmus.jobs import InvalidJobState, JobRequest, JobStatus, ManualClock, RetryPolicy
from isthmus.jobs import transitions as t
from isthmus.jobs.errors import InvalidJobRequest
from isthmus.jobs.models import HINTS, Job, JobFilter

NOW = ManualClock().now()
POLICY = RetryPolicy(max_attempts=3, base_delay=10.0, max_delay=60.0, jitter=0.0)


def job(**changes) -> Job:
    values = t.new_job(JobRequest("sync", "r1", "p1", {"a": 1}), NOW)
    values["status"] = JobStatus(values["status"])
    return replace(Job(**values), **changes)


def test_backoff_doubles_and_is_capped() -> None:
    assert [POLICY.delay(n) for n in range(1, 6)] == [10.0, 20.0, 40.0, 60.0, 60.0]
    assert POLICY.delay(10_000) == 60.0  # no overflow for huge attempt numbers


def test_backoff_jitter_stays_within_its_fraction() -> None:
    policy = RetryPolicy(base_delay=10.0, max_delay=100.0, jitter=0.5)
    assert policy.delay(1, rand=lambda: 0.0) == 5.0
    assert policy.delay(1, rand=lambda: 1.0) == 15.0
    assert policy.delay(1, rand=lambda: 0.5) == 10.0


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"base_delay": -1}, {"jitter": 2}])
def test_retry_policy_rejects_nonsense(kwargs) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)


def test_enqueue_on_running_sets_rerun_and_keeps_status() -> None:
    values = t.on_enqueue(job(status=JobStatus.RUNNING), JobRequest("sync", "r1", None, {"a": 2}), NOW)
    assert values == {"payload": {"a": 2}, "rerun": True}


def test_enqueue_on_new_keeps_what_the_waiting_event_needs() -> None:
    waiting = job(status=JobStatus.NEW, payload={"network_id": "n", "macs": ["m1", "m2"], HINTS: {"first_bind": True}})
    values = t.on_enqueue(waiting, JobRequest("sync", "r1", None, {"network_id": "n", "macs": ["m2"]}), NOW)
    # both events' MACs are looked at; the newer event gave no hint, so its run skips nothing
    assert values["payload"] == {"network_id": "n", "macs": ["m1", "m2"], HINTS: {}}


def test_a_hint_holds_when_every_waiting_event_gave_it() -> None:
    first = {"macs": ["m1"], HINTS: {"first_bind": True, "other": True}}
    values = t.on_enqueue(job(status=JobStatus.RUNNING, rerun=True, payload=first),
                          JobRequest("sync", "r1", None, {"macs": ["m1"], HINTS: {"first_bind": True}}), NOW)
    assert values["payload"] == {"macs": ["m1"], HINTS: {"first_bind": True}}


def test_a_handler_reads_a_hint_only_when_it_holds() -> None:
    from isthmus.jobs import JobContext

    def ctx(payload):
        return JobContext("j", "sync", "r1", None, payload, 1)

    assert ctx({HINTS: {"first_bind": True}}).hinted("first_bind")
    assert not ctx({HINTS: {}}).hinted("first_bind") and not ctx({}).hinted("first_bind")
    assert not ctx({HINTS: {"first_bind": "yes"}}).hinted("first_bind") and not ctx({HINTS: []}).hinted("x")


def test_a_served_payload_is_replaced() -> None:
    served = {"macs": ["m1"], HINTS: {}}
    running = t.on_enqueue(job(status=JobStatus.RUNNING, payload=served),
                           JobRequest("sync", "r1", None, {"macs": ["m2"], HINTS: {"first_bind": True}}), NOW)
    assert running["payload"] == {"macs": ["m2"], HINTS: {"first_bind": True}}
    done = t.on_enqueue(job(status=JobStatus.SUCCESS, payload=served), JobRequest("sync", "r1", None, {"a": 1}), NOW)
    assert done["payload"] == {"a": 1}


def test_enqueue_on_finished_starts_a_fresh_cycle() -> None:
    old = job(status=JobStatus.FAIL, attempt=3, failures=3, run_after=NOW - timedelta(days=1))
    values = t.on_enqueue(old, JobRequest("sync", "r1", "p2"), NOW)
    assert values["status"] == "NEW" and values["attempt"] == 0 and values["failures"] == 0
    assert values["run_after"] == NOW and values["project_id"] == "p2"


def test_success_with_rerun_goes_back_to_new() -> None:
    values = t.on_success(job(status=JobStatus.RUNNING, rerun=True, attempt=2, failures=1), NOW)
    assert values["status"] == "NEW" and values["rerun"] is False
    assert values["attempt"] == 0 and values["failures"] == 0 and values["lease_token"] is None


def test_error_backs_off_then_fails_when_exhausted() -> None:
    first = t.on_error(job(status=JobStatus.RUNNING, failures=0), NOW, "boom", POLICY)
    assert first["status"] == "NEW" and first["failures"] == 1
    assert first["run_after"] == NOW + timedelta(seconds=10)
    last = t.on_error(job(status=JobStatus.RUNNING, failures=2), NOW, "boom", POLICY)
    assert last["status"] == "FAIL" and last["failures"] == 3 and last["last_error"] == "boom"


def test_expired_takeover_counts_as_failure_and_can_fail_a_poison_job() -> None:
    running = job(status=JobStatus.RUNNING, attempt=1, failures=0, lease_owner="dead")
    values = t.on_claim(running, "w2", NOW, 30.0, POLICY)
    assert values["status"] == "RUNNING" and values["attempt"] == 2 and values["failures"] == 1
    assert "dead" in values["last_error"]
    poison = job(status=JobStatus.RUNNING, attempt=3, failures=2, lease_owner="dead")
    assert t.on_claim(poison, "w2", NOW, 30.0, POLICY)["status"] == "FAIL"


@pytest.mark.parametrize("status", [JobStatus.RUNNING, JobStatus.SUCCESS])
def test_redo_refuses_running_and_success(status) -> None:
    with pytest.raises(InvalidJobState):
        t.on_redo(job(status=status), NOW)


def test_error_text_is_clipped() -> None:
    values = t.on_error(job(status=JobStatus.RUNNING), NOW, "x" * 10_000, POLICY)
    assert len(values["last_error"]) == t.MAX_ERROR_LEN


def test_status_filter_is_case_insensitive_and_validated() -> None:
    assert JobFilter(status="fail").status is JobStatus.FAIL
    assert JobFilter(status="FAIL").status is JobStatus.FAIL
    with pytest.raises(InvalidJobRequest, match="status"):
        JobFilter(status="done")


@pytest.mark.parametrize(
    ("args", "field"),
    [(("", "r"), "type"), (("t", ""), "resource_id"), (("t" * 65, "r"), "type"), (("t", "r" * 256), "resource_id")],
)
def test_requests_name_the_bad_field(args, field) -> None:
    with pytest.raises(InvalidJobRequest, match=field):
        JobRequest(*args)
