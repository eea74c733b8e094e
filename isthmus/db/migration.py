"""The versioned schema of the Isthmus database (Alembic), and the start-up check.

Services never migrate on their own: an operator runs ``isthmus db upgrade``
(the sandbox and the operator's Job do it for them), and every service refuses
to start on a schema older than its code. A schema *newer* than the code is
accepted: migrations are expand-only where a rolling upgrade needs them, so
old services keep running while new ones roll out.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine
from sqlalchemy.schema import SchemaItem

LOG = logging.getLogger(__name__)

# Its own name: the Isthmus tables may share a database (or a server's default
# database) with another Alembic user, whose alembic_version must stay apart.
VERSION_TABLE = "isthmus_alembic_version"
UPGRADE_COMMAND = "isthmus db upgrade"
_SCRIPTS = Path(__file__).with_name("migrations")


class SchemaStatus(enum.StrEnum):
    CURRENT = "current"        # at the code's head
    BEHIND = "behind"          # older than the code: run the upgrade
    AHEAD = "ahead"            # newer than the code (rolling upgrade): accepted
    EMPTY = "empty"            # never migrated, no Isthmus tables
    UNVERSIONED = "unversioned"  # Isthmus tables from before migrations existed


@dataclass(frozen=True)
class SchemaState:
    status: SchemaStatus
    current: str | None
    head: str

    @property
    def usable(self) -> bool:
        return self.status in (SchemaStatus.CURRENT, SchemaStatus.AHEAD)

    def describe(self) -> str:
        if self.status is SchemaStatus.CURRENT:
            return f"at {self.head} (head)"
        if self.status is SchemaStatus.AHEAD:
            return f"at {self.current}, newer than this code's head {self.head} (accepted: rolling upgrade)"
        if self.status is SchemaStatus.BEHIND:
            return f"at {self.current}, behind this code's head {self.head}"
        if self.status is SchemaStatus.UNVERSIONED:
            return f"has Isthmus tables from before versioned migrations, needs {self.head}"
        return f"is empty, needs {self.head}"


class SchemaOutdated(RuntimeError):
    """A service met a schema older than its code. The message is one line."""


def _config(connection: sa.Connection | None = None,
            progress: Callable[[str], None] | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["connection"] = connection
    config.attributes["progress"] = progress
    return config


def script() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


def head_revision() -> str:
    head = script().get_current_head()
    assert head is not None, "no migrations"
    return head


def current_revision(connection: sa.Connection) -> str | None:
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def inspect(engine: Engine) -> SchemaState:
    """Where the database stands against this code (reads only)."""
    from isthmus.db.engine import read_tx
    from isthmus.db.schema import table_names

    scripts = script()
    head = head_revision()
    with read_tx(engine) as conn:
        current = current_revision(conn)
        tables = set(sa.inspect(conn).get_table_names())
    if current is None:
        status = SchemaStatus.UNVERSIONED if tables & table_names() else SchemaStatus.EMPTY
    elif current == head:
        status = SchemaStatus.CURRENT
    elif _known(scripts, current):
        status = SchemaStatus.BEHIND
    else:
        status = SchemaStatus.AHEAD
    return SchemaState(status, current, head)


def _known(scripts: ScriptDirectory, revision: str) -> bool:
    try:
        return scripts.get_revision(revision) is not None
    except Exception:  # noqa: BLE001 - alembic raises several kinds for an unknown id
        return False


def upgrade(engine: Engine, revision: str = "head", progress: Callable[[str], None] | None = None) -> SchemaState:
    """Carry the database forward to ``revision``; idempotent. A database made
    before migrations existed is adopted: the baseline creates only what is missing."""
    from isthmus.db.engine import write_tx

    with write_tx(engine) as conn:
        command.upgrade(_config(conn, progress), revision)
    return inspect(engine)


def drift(engine: Engine) -> list[tuple[Any, ...]]:
    """Differences between the live schema and the code's tables (Alembic's
    autogenerate diff: tables, columns, types, indexes, constraints); [] when none."""
    from alembic.autogenerate import compare_metadata

    from isthmus.db.engine import read_tx
    from isthmus.db.schema import metadatas

    def ours(obj: SchemaItem, name: str | None, type_: str, reflected: bool, compare_to: SchemaItem | None) -> bool:
        return not (type_ == "table" and name == VERSION_TABLE)

    with read_tx(engine) as conn:
        context = MigrationContext.configure(conn, opts={
            "compare_type": True, "include_object": ours, "version_table": VERSION_TABLE})
        # Alembic compares a list of MetaData as it does target_metadata; its annotation names one.
        return list(compare_metadata(context, metadatas()))  # type: ignore[arg-type]


def require_current(engine: Engine, service: str) -> SchemaState:
    """Raise :class:`SchemaOutdated` unless the schema is at (or past) the code's head."""
    state = inspect(engine)
    if not state.usable:
        url = engine.url.render_as_string(hide_password=True)
        raise SchemaOutdated(f"{service}: the Isthmus database {url} {state.describe()}; "
                             f"run '{UPGRADE_COMMAND}' with this service's configuration first")
    if state.status is SchemaStatus.AHEAD:
        LOG.warning("%s: the Isthmus database is %s", service, state.describe())
    return state
