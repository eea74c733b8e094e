"""Shared fixtures: the real sandbox that integration tests run against."""

from __future__ import annotations

# Before any test module pulls in neutron: oslo_service.wsgi imports eventlet.wsgi,
# whose green BaseHTTPServer re-imports http.server with green sockets and threads.
# It leaves that copy in sys.modules unless the stdlib one was imported first (and
# as the ``http`` package's attribute either way, hence ``from http.server import``
# in product code). A real-thread HTTP server built from the green copy hangs in
# eventlet's hub on shutdown: the CCM health tests did, for CI's whole budget.
import http.server  # noqa: F401 - imported first on purpose, see above
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandboxes import Sandbox, running, start_sandbox

# The tiers (unit, component, integration) and the unit tier's guard: hooks of this conftest.
from tests.tiers import (  # noqa: F401
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_protocol,
)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory) -> Iterator[Sandbox]:
    """A full sandbox (compute in RegionOne and RegionTwo), started once per session.

    Set ISTHMUS_SANDBOX_DIR to an already running sandbox to skip start/stop
    (tools/test.sh starts one for all its pytest runs; handy while developing)."""
    from isthmus.sandbox.layout import Layout

    existing = os.environ.get("ISTHMUS_SANDBOX_DIR")
    if existing:
        layout = Layout.load(Path(existing))
        assert layout is not None, f"no sandbox in {existing}"
        yield Sandbox(layout.state_dir, layout.base_port, layout.regions)
        return
    with running(start_sandbox, tmp_path_factory.mktemp("sandbox")) as started:
        yield started
