"""SANDBOX ONLY: "something changed" from a regional neutron-server to its
dataplane agent, over a Unix datagram socket.

Neutron tells its real agents of changes (port_update, l2population's fdb
casts over RPC); the sandbox runs no RPC, so the sandbox binder (a mechanism
driver inside the region's neutron-server) sends one empty datagram after every
port, network, subnet, router and floating IP change. The datagram carries
nothing: the agent reads Neutron's API anew on each wake-up (level-triggered),
coalesces a burst into one pass, and still reads every ``resync`` seconds as a
backstop (a lost datagram, an agent restarted mid-burst). Sending never blocks
and never fails the API call: no agent listening is the normal case without
``--dataplane``.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def socket_path(run_dir: Path, region: str) -> Path:
    return run_dir / f"dataplane-{region}.sock"


def notify(path: str) -> None:
    """Wake the agent listening on ``path``, if any (never raises)."""
    if not path:
        return
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.sendto(b"", path)
    except OSError:
        pass  # no agent, or its queue is full (it will read everything anyway)


class Listener:
    """The agent's end: ``wait(timeout)`` returns True when woken, False on timeout."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))

    def wait(self, timeout: float) -> bool:
        if timeout > 0:
            self.sock.settimeout(timeout)
        else:
            self.sock.setblocking(False)
        try:
            self.sock.recv(1)
        except (TimeoutError, BlockingIOError):
            return False
        self.drain()
        return True

    def drain(self) -> None:
        """Swallow what queued up: one pass answers a whole burst."""
        self.sock.setblocking(False)
        try:
            while True:
                self.sock.recv(1)
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
