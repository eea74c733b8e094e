"""The CCM's per-region breaker: the shared isthmus.breaker.Breaker under the CCM's rules."""

import threading

import pytest

from isthmus.ccm.errors import RegionError
from isthmus.ccm.openstack.clients import RegionBreaker


def _clock() -> tuple[list[float], RegionBreaker]:
    now = [0.0]
    return now, RegionBreaker(cooldown=30, clock=lambda: now[0])


def test_after_the_pause_one_call_probes_and_the_others_keep_failing_fast() -> None:
    now, breaker = _clock()
    since = breaker.admit("Two")
    now[0] = 1
    breaker.timed_out("Two", "GET server timed out", since)
    assert breaker.is_open("Two") and not breaker.is_open("One")
    with pytest.raises(RegionError, match=r"not asked for 30s more after a timeout \(GET server timed out\)"):
        breaker.admit("Two")
    breaker.admit("One")  # another region is not paused
    now[0] = 32
    breaker.admit("Two")  # the probe
    refused: list[BaseException] = []

    def other_node() -> None:
        try:
            breaker.admit("Two")
        except RegionError as err:
            refused.append(err)

    thread = threading.Thread(target=other_node)
    thread.start()
    thread.join()
    assert len(refused) == 1  # while the probe is out
    breaker.answered("Two")
    breaker.admit("Two")
    assert not breaker.is_open("Two")


def test_a_timeout_while_the_region_answered_others_is_busy_not_hung() -> None:
    now, breaker = _clock()
    slow = breaker.admit("Two")
    now[0] = 1
    breaker.admit("Two")
    breaker.answered("Two")
    now[0] = 2
    breaker.timed_out("Two", "slow list", slow)
    assert not breaker.is_open("Two")
    breaker.check("Two")


def test_check_admits_no_probe() -> None:
    now, breaker = _clock()
    breaker.timed_out("Two", "x", breaker.admit("Two"))
    with pytest.raises(RegionError):
        breaker.check("Two")
    now[0] = 31
    breaker.check("Two")  # the pause is over: building a client may go on
    breaker.admit("Two")  # and the call after it is still the probe


def test_cooldown_zero_never_pauses() -> None:
    breaker = RegionBreaker(cooldown=0)
    breaker.timed_out("Two", "x", breaker.admit("Two"))
    assert not breaker.is_open("Two")
    breaker.admit("Two")
    breaker.check("Two")
