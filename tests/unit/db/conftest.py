"""An empty database per test on SQLite, PostgreSQL and MariaDB (migrations
must start from nothing, so the job tests' shared database does not fit)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.dbservers import BACKENDS, Unreachable, create_database, drop_database


@pytest.fixture(params=BACKENDS)
def empty_db_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    backend = request.param
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/isthmus.sqlite"
        return
    name = f"isthmus_mig_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        url = create_database(backend, name)
    except Unreachable as exc:
        pytest.skip(f"{backend} server unreachable: {exc}")
    yield url
    drop_database(backend, name)
