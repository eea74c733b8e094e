"""Helpers of the integration tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import time

import openstack.exceptions as os_exc

CENTRAL = "CentralRegion"


def eventually(check, timeout: float = 120, interval: float = 1.0, what: str = "condition"):
    """Poll until ``check()`` returns a truthy value (jobs run asynchronously)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def delete_network(conn, network_id: str) -> bool:
    try:
        conn.network.delete_network(network_id, ignore_missing=True)
        return True
    except os_exc.ConflictException:
        return False  # a server's port is still being deleted
