"""Fixtures: one engine per test on SQLite, PostgreSQL and MariaDB.

For the servers a uniquely named database is created once per session and
dropped at its end; a server that cannot be reached skips its tests with the
reason. ISTHMUS_TEST_POSTGRES_URL / ISTHMUS_TEST_MARIADB_URL override the
admin URLs (default: the local servers, database ``test``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from isthmus.jobs import JobStore, ManualClock, create_schema, make_engine
from isthmus.jobs.schema import metadata

ADMIN_URLS = {
    "postgresql": os.environ.get(
        "ISTHMUS_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
    ),
    "mariadb": os.environ.get("ISTHMUS_TEST_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test"),
}
BACKENDS = ["sqlite", "postgresql", "mariadb"]


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
        admin = sa.engine.make_url(ADMIN_URLS[backend])
        try:
            engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT", connect_args=_timeout(backend))
            with engine.connect() as conn:
                conn.exec_driver_sql(_create_sql(backend, self.name))
            engine.dispose()
        except sa.exc.OperationalError as exc:
            self.errors[backend] = f"{admin.render_as_string(hide_password=True)}: {exc.orig}"
            return
        url = admin.set(database=self.name).render_as_string(hide_password=False)
        schema_engine = make_engine(url)
        create_schema(schema_engine)
        schema_engine.dispose()
        self.urls[backend] = url

    def drop_all(self) -> None:
        for backend in self.urls:
            admin = sa.create_engine(ADMIN_URLS[backend], isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.exec_driver_sql(_drop_sql(backend, self.name))
            admin.dispose()


def _timeout(backend: str) -> dict[str, int]:
    return {"connect_timeout": 3}


def _create_sql(backend: str, name: str) -> str:
    if backend == "mariadb":
        return f"CREATE DATABASE {name} CHARACTER SET utf8mb4"
    return f"CREATE DATABASE {name}"


def _drop_sql(backend: str, name: str) -> str:
    if backend == "postgresql":
        return f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    return f"DROP DATABASE IF EXISTS {name}"


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
        create_schema(engine)
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
    create_schema(engine)
    engine.dispose()
    return url


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    create_schema(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(engine: Engine, clock: ManualClock) -> JobStore:
    return JobStore(engine, clock)
