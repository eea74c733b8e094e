"""The machine's database servers for tests: PostgreSQL and MariaDB.

Tests make uniquely named databases on them and drop them at the end; a server
that cannot be reached skips its tests with the reason.
ISTHMUS_TEST_POSTGRES_URL / ISTHMUS_TEST_MARIADB_URL override the admin URLs
(default: the local servers, database ``test``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

ADMIN_URLS = {
    "postgresql": os.environ.get(
        "ISTHMUS_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
    ),
    "mariadb": os.environ.get("ISTHMUS_TEST_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test"),
}
# SQLite is a file: unit tier. The servers are the component tier (tests/tiers.py);
# the mark is explicit because libpq's sockets are not Python's, which the unit
# tier's guard sees.
BACKENDS = [
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.component),
    pytest.param("mariadb", marks=pytest.mark.component),
]


class Unreachable(Exception):
    pass


def create_database(backend: str, name: str) -> str:
    """Create database ``name`` on ``backend``'s server; its URL. Raises Unreachable."""
    admin = sa.engine.make_url(ADMIN_URLS[backend])
    create = f"CREATE DATABASE {name}" + (" CHARACTER SET utf8mb4" if backend == "mariadb" else "")
    try:
        engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.exec_driver_sql(create)
        engine.dispose()
    except sa.exc.OperationalError as exc:
        raise Unreachable(f"{admin.render_as_string(hide_password=True)}: {exc.orig}") from exc
    return admin.set(database=name).render_as_string(hide_password=False)


def drop_database(backend: str, name: str) -> None:
    drop = f"DROP DATABASE IF EXISTS {name}" + (" WITH (FORCE)" if backend == "postgresql" else "")
    admin = sa.create_engine(ADMIN_URLS[backend], isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(drop)
    admin.dispose()


@contextmanager
def empty_database(backend: str, tmp_path: Path, prefix: str) -> Iterator[str]:
    """The URL of an empty database on ``backend`` (SQLite: a file in ``tmp_path``),
    dropped afterwards. Raises Unreachable before yielding when the server is down."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/{prefix}.sqlite"
        return
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    url = create_database(backend, name)
    try:
        yield url
    finally:
        drop_database(backend, name)
