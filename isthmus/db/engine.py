"""Engine factory and transaction helpers that behave the same on every dialect.

SQLite is the embedded default, so it gets the care a server would give for
free: WAL (readers never block the writer), a busy timeout (writers queue
instead of failing), and ``BEGIN IMMEDIATE`` for write transactions (take the
write lock up front; a deferred transaction that reads then writes can fail
with SQLITE_BUSY without waiting, which is what breaks naive multi-process use).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect, Engine

LOG = logging.getLogger(__name__)
T = TypeVar("T")

_BEGIN_OPTION = "isthmus_sqlite_begin"
# A database server that is black-holed (no answer, no reset) must cost a
# bounded wait, never a hung worker: drivers wait for ever by default.
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 60  # longer than a lock wait the server itself would give up on (InnoDB: 50 s)
_TRANSIENT_MYSQL = {1205, 1213}  # lock wait timeout, deadlock
_TRANSIENT_PG = {"40001", "40P01"}  # serialization failure, deadlock


def make_engine(url: str, *, busy_timeout: float = 30.0, echo: bool = False) -> Engine:
    """Create an engine tuned for the job engine's short transactions."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, busy_timeout, echo)
    # READ COMMITTED: every compare-and-set sees the latest committed row, and
    # InnoDB takes no gap locks, which avoids needless deadlocks on the queue.
    return sa.create_engine(url, echo=echo, pool_pre_ping=True, isolation_level="READ COMMITTED",
                            pool_timeout=CONNECT_TIMEOUT, connect_args=timeout_args(parsed))


def timeout_args(url: sa.engine.URL) -> dict[str, Any]:
    """The driver's connect arguments that bound every wait on the server (the
    URL's own query parameters win: an operator may tune them)."""
    driver = url.get_driver_name()
    if driver == "pymysql":
        bounds: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT, "read_timeout": READ_TIMEOUT,
                                  "write_timeout": READ_TIMEOUT}
    elif driver in ("psycopg2", "psycopg"):
        # libpq has no read timeout: TCP keepalives find a dead peer, and
        # tcp_user_timeout bounds data the server never acknowledges.
        bounds = {"connect_timeout": CONNECT_TIMEOUT, "keepalives": 1, "keepalives_idle": 10,
                  "keepalives_interval": 5, "keepalives_count": 3, "tcp_user_timeout": READ_TIMEOUT * 1000}
    else:
        return {}
    return {k: v for k, v in bounds.items() if k not in url.query}


def _sqlite_engine(url: str, busy_timeout: float, echo: bool) -> Engine:
    engine = sa.create_engine(url, echo=echo, connect_args={"timeout": busy_timeout})
    # Tells process-wide SQLite tweaks (the sandbox's, for OpenStack services) to
    # leave this engine's BEGIN to us.
    # An attribute of our own on SQLAlchemy's Engine, which does not declare it.
    engine.isthmus_begins_itself = True  # type: ignore[attr-defined]

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:  # the DB-API connection (sqlite3's)
        # Let us emit BEGIN ourselves (pysqlite's implicit BEGIN is always deferred).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get(_BEGIN_OPTION, "IMMEDIATE")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


@contextmanager
def write_tx(engine: Engine) -> Iterator[Connection]:
    """A transaction that will write (SQLite: holds the write lock from the start)."""
    with engine.begin() as conn:
        yield conn


@contextmanager
def read_tx(engine: Engine) -> Iterator[Connection]:
    """A read-only transaction (SQLite: deferred, so it never blocks writers)."""
    with engine.connect() as conn:
        conn.execution_options(**{_BEGIN_OPTION: "DEFERRED"})
        with conn.begin():
            yield conn


def skip_locked_supported(dialect: Dialect) -> bool:
    """Whether SELECT ... FOR UPDATE SKIP LOCKED can be used (an optimisation only).

    Correctness never depends on it: every claim is a compare-and-set.
    """
    version = dialect.server_version_info or ()
    if dialect.name == "postgresql":
        return version >= (9, 5)
    if dialect.name in ("mysql", "mariadb"):
        if getattr(dialect, "is_mariadb", False):
            return version >= (10, 6)
        return version >= (8, 0, 1)
    return False


def is_transient(exc: BaseException) -> bool:
    """Deadlocks, lock timeouts and SQLite "database is locked": safe to retry."""
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    if getattr(orig, "pgcode", None) in _TRANSIENT_PG:
        return True
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and args[0] in _TRANSIENT_MYSQL:
        return True
    return "database is locked" in str(orig) or "database table is locked" in str(orig)


def retry_transient(fn: Callable[[], T], *, attempts: int = 8, base_delay: float = 0.02) -> T:
    """Run ``fn`` (which opens its own transaction) again after transient DB errors."""
    for n in range(1, attempts + 1):
        try:
            return fn()
        except sa.exc.DBAPIError as exc:
            if n == attempts or not is_transient(exc):
                raise
            LOG.debug("transient database error, retry %d: %s", n, exc)
            time.sleep(base_delay * n * (1 + random.random()))
    raise AssertionError("unreachable")


def database_now(engine: Engine) -> datetime:
    """The database server's current time, timezone-aware UTC: the one clock
    every worker of a shared database agrees on (theirs may drift apart).
    SQLite is embedded: its clock is this host's, read without a query (a
    query would begin a transaction, and SQLite's take the write lock)."""
    dialect = engine.dialect.name
    if dialect == "sqlite":
        return datetime.now(UTC)
    if dialect in ("mysql", "mariadb"):
        query = "SELECT UTC_TIMESTAMP(6)"
    elif dialect == "postgresql":
        query = "SELECT clock_timestamp() AT TIME ZONE 'utc'"
    else:
        raise ValueError(f"no server clock known for {dialect}")
    with engine.connect() as conn:
        value = conn.exec_driver_sql(query).scalar()
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise TypeError(f"{dialect} answered {value!r} for its clock")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
