"""Fixtures: one engine per test on SQLite, PostgreSQL and MariaDB.

For the servers a uniquely named database is created once per session and
dropped at its end (``tests/dbservers.py``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from sqlalchemy.engine import Engine

from isthmus.db.migration import upgrade  # versioned, as the services require
from isthmus.jobs import JobStore, ManualClock, make_engine
from isthmus.jobs.schema import metadata
from tests.dbservers import BACKENDS, Unreachable, create_database, drop_database


@dataclass
class ServerDatabases:
    """Creates each server's test database on first use; drops them all at the end."""

    name: str = field(default_factory=lambda: f"isthmus_jobs_{os.getpid()}_{uuid.uuid4().hex[:8]}")
    urls: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def url(self, backend: str) -> str:
        if backend not in self.urls and backend not in self.errors:
            self._create(backend)
        if backend in self.errors:
            pytest.skip(f"{backend} server unreachable: {self.errors[backend]}")
        return self.urls[backend]

    def _create(self, backend: str) -> None:
        try:
            url = create_database(backend, self.name)
        except Unreachable as exc:
            self.errors[backend] = str(exc)
            return
        schema_engine = make_engine(url)
        upgrade(schema_engine)
        schema_engine.dispose()
        self.urls[backend] = url

    def drop_all(self) -> None:
        for backend in self.urls:
            drop_database(backend, self.name)


@pytest.fixture(scope="session")
def server_databases() -> Iterator[ServerDatabases]:
    servers = ServerDatabases()
    yield servers
    servers.drop_all()


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path, server_databases: ServerDatabases) -> str:
    """A database URL with the job tables present and empty."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/isthmus.sqlite"
        engine = make_engine(url)
        upgrade(engine)
    else:
        url = server_databases.url(request.param)
        engine = make_engine(url)
        with engine.begin() as conn:
            for table in reversed(metadata.sorted_tables):
                conn.execute(table.delete())
    engine.dispose()
    return url


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """SQLite only, for worker behaviour that does not depend on the backend."""
    url = f"sqlite:///{tmp_path}/isthmus.sqlite"
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(engine: Engine, clock: ManualClock) -> JobStore:
    return JobStore(engine, clock)
