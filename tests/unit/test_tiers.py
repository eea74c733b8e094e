"""tests/tiers.py: which tier a test is in, and the unit tier's guard (this test runs under it)."""

from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.tiers import TESTS, UnitTierViolation, tier_of, unit_guard


@dataclass
class FakeItem:
    path: Path
    marks: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


@pytest.mark.parametrize("where,marks,tier", [
    ("unit/jobs/test_store.py", set(), "unit"),
    ("unit/jobs/test_store.py", {"component"}, "component"),
    ("component/test_x.py", set(), "component"),
    ("integration/test_gateway.py", set(), "integration"),
    ("conformance/test_tempest.py", set(), "integration"),
])
def test_tier_of(where, marks, tier):
    assert tier_of(FakeItem(TESTS / where, marks)) == tier  # type: ignore[arg-type]  # duck-typed item


def test_a_tcp_connect_or_listen_is_refused_naming_the_fix():
    with unit_guard(), socket.socket() as sock, pytest.raises(UnitTierViolation, match="tests/component"):
        sock.connect(("127.0.0.1", 9))
    with unit_guard(), socket.socket() as sock, pytest.raises(UnitTierViolation, match="listened on"):
        sock.bind(("127.0.0.1", 0))


def test_a_process_is_refused_and_a_unix_socket_pair_is_not():
    with unit_guard():
        with pytest.raises(UnitTierViolation, match="started a process"):
            subprocess.run(["true"], check=False)
        left, right = socket.socketpair()  # what an asyncio loop makes for itself
        left.sendall(b"x")
        assert right.recv(1) == b"x"
        left.close()
        right.close()


def test_the_guard_puts_everything_back():
    before = (socket.socket.connect, socket.socket.bind, subprocess.Popen.__init__)
    with unit_guard():
        assert socket.socket.connect is not before[0]
    assert (socket.socket.connect, socket.socket.bind, subprocess.Popen.__init__) == before
