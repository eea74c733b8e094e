"""isthmus.polling: every wait is bounded and says what it saw last."""

from collections.abc import Iterator

import pytest

from isthmus.polling import poll, retry


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_poll_returns_the_first_truthy_value() -> None:
    t = FakeTime()
    answers: Iterator[object] = iter([0, None, [], "ready"])
    assert poll(lambda: next(answers), 10, "ready", interval=1, clock=t.clock, sleep=t.sleep) == "ready"
    assert t.now == 3


def test_poll_gives_up_after_the_timeout_naming_what_it_saw() -> None:
    t = FakeTime()
    with pytest.raises(TimeoutError, match=r"shadow in RegionTwo: not within 5s \(last: \[\]\)"):
        poll(lambda: [], 5, lambda: "shadow in RegionTwo", interval=2, clock=t.clock, sleep=t.sleep)
    assert t.now == 6  # one look at or past the bound, never a sleep beyond it unchecked


def test_an_error_named_is_not_yet_and_any_other_ends_the_wait() -> None:
    t, calls = FakeTime(), []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("refused")
        return "up"

    assert poll(flaky, 10, "service", retry_on=(ConnectionError,), clock=t.clock, sleep=t.sleep) == "up"
    with pytest.raises(ValueError):
        poll(lambda: int("x"), 10, "number", retry_on=(ConnectionError,), clock=t.clock, sleep=t.sleep)
    with pytest.raises(TimeoutError, match="ConnectionError: refused") as err:
        poll(lambda: (_ for _ in ()).throw(ConnectionError("refused")), 0, "service", retry_on=(ConnectionError,),
             clock=t.clock, sleep=t.sleep)
    assert isinstance(err.value.__cause__, ConnectionError)


def test_retry_returns_a_falsy_value_once_the_call_stops_raising() -> None:
    calls = []

    def answer() -> int:
        calls.append(1)
        if len(calls) < 2:
            raise OSError("not yet")
        return 0

    assert retry(answer, 5, "zero", interval=0) == 0
