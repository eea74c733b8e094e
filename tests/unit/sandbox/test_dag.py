import io
import threading

import pytest

from isthmus.sandbox.dag import Progress, Step, run_steps


def test_steps_run_after_their_dependencies():
    order = []
    lock = threading.Lock()

    def record(name):
        def run():
            with lock:
                order.append(name)
        return run

    steps = [Step("c", record("c"), ("a", "b")), Step("a", record("a")), Step("b", record("b"), ("a",))]
    out = io.StringIO()
    run_steps(steps, Progress(out))
    assert order == ["a", "b", "c"]
    assert "c: ready" in out.getvalue()


def test_failure_stops_new_steps_and_is_raised():
    ran = []
    steps = [
        Step("bad", lambda: (_ for _ in ()).throw(RuntimeError("boom"))),
        Step("after-bad", lambda: ran.append("after-bad"), ("bad",)),
    ]
    out = io.StringIO()
    with pytest.raises(RuntimeError, match="boom"):
        run_steps(steps, Progress(out))
    assert ran == []
    assert "bad: FAILED" in out.getvalue()


def test_unknown_dependency_is_an_error():
    with pytest.raises(ValueError, match="unknown steps"):
        run_steps([Step("a", lambda: None, ("missing",))], Progress(io.StringIO()))


def test_cycle_is_detected():
    with pytest.raises(ValueError, match="cycle"):
        run_steps([Step("a", lambda: None, ("b",)), Step("b", lambda: None, ("a",))], Progress(io.StringIO()))
