"""Every region's step side by side: what a region's failure makes of the job."""

from __future__ import annotations

import pytest

from isthmus.clients import Rejected, Unavailable
from isthmus.jobs import PermanentFailure, RetryLater
from isthmus.network.reconcilers.fanout import RefusedByPolicy, in_every_region


def fails_with(errors: dict[str, Exception], done: list[str]):
    def step(region: str) -> None:
        if region in errors:
            raise errors[region]
        done.append(region)
    return step


def test_an_unreachable_region_is_a_retry_and_delays_no_other():
    done: list[str] = []
    with pytest.raises(RetryLater, match="unreachable: R2"):
        in_every_region(["R1", "R2", "R3"], fails_with({"R2": Unavailable("down")}, done), "t")
    assert sorted(done) == ["R1", "R3"]


def test_a_refusal_of_the_request_fails_the_job_with_the_regions_message():
    with pytest.raises(PermanentFailure, match="R1: .*bad mac"):
        in_every_region(["R1"], fails_with({"R1": Rejected(400, "bad mac")}, []), "t")


def test_a_policy_refusal_is_a_bounded_retry():
    """A neutron-server just started answered the service user 403 for a shadow it
    created a moment later: the job must not fail for good on it, nor retry a real
    refusal for ever (RetryLater has no attempt limit; a plain failure has max_attempts)."""
    with pytest.raises(RefusedByPolicy, match=r"refused by policy: R1 \(.*disallowed by policy\)") as refused:
        in_every_region(["R1", "R2"], fails_with({"R1": Rejected(403, "disallowed by policy")}, []), "t")
    assert not isinstance(refused.value, (RetryLater, PermanentFailure))
    with pytest.raises(RefusedByPolicy, match="unreachable: R2; refused by policy: R1"):
        in_every_region(["R1", "R2"], fails_with({"R1": Rejected(403, "no"), "R2": Unavailable("down")}, []), "t")
