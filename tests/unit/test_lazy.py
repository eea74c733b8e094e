"""isthmus.lazy: one value per process, built on first use."""

from __future__ import annotations

import threading

import pytest

from isthmus.lazy import Lazy


def test_the_first_call_builds_and_every_later_one_gets_the_same_value():
    built: list[object] = []

    def build() -> object:
        built.append(object())
        return built[-1]

    lazy: Lazy[object] = Lazy()
    threads = [threading.Thread(target=lazy.get, args=(build,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 1 and lazy.get(build) is built[0]


def test_a_build_that_raises_builds_nothing_and_the_next_call_tries_again():
    lazy: Lazy[str] = Lazy()

    def broken() -> str:
        raise RuntimeError("database not up yet")

    with pytest.raises(RuntimeError):
        lazy.get(broken)
    assert lazy.get(lambda: "up") == "up"
