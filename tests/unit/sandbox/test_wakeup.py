"""The dataplane agent's wake-up socket: a notification wakes it, a burst is one pass."""

from __future__ import annotations

from isthmus.sandbox.dataplane import wakeup


def test_a_notification_wakes_the_listener_and_a_burst_coalesces(tmp_path):
    path = wakeup.socket_path(tmp_path, "RegionOne")
    listener = wakeup.Listener(path)
    try:
        assert listener.wait(0.05) is False  # nothing sent: times out
        for _ in range(50):
            wakeup.notify(str(path))
        assert listener.wait(5.0) is True
        assert listener.wait(0.05) is False  # the burst was drained with the first wake-up
    finally:
        listener.close()
    assert not path.exists()


def test_notify_without_a_listener_never_raises(tmp_path):
    wakeup.notify(str(tmp_path / "nobody.sock"))
    wakeup.notify("")
