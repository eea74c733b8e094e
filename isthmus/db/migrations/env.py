"""Alembic environment: run on the connection ``isthmus.db.migration`` hands in.

There is no alembic.ini and no URL here: the caller owns the engine (with the
SQLite tuning of ``isthmus.db.engine``) and the transaction.
"""

from collections.abc import Collection, Mapping
from typing import Any

from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo

from isthmus.db.migration import VERSION_TABLE
from isthmus.db.schema import metadatas

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError("Isthmus migrations run online only, through isthmus.db.migration")
progress = config.attributes.get("progress")


def _report(ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any], run_args: Mapping[str, Any]) -> None:
    if progress is not None:
        revision = step.up_revision
        assert revision is not None  # an upgrade step names the revision it applied
        # A Script (which has .doc) at run time; alembic annotates it as its base, Revision.
        progress(f"applied {step.up_revision_id}: {revision.doc.splitlines()[0]}")  # type: ignore[attr-defined]


context.configure(
    connection=connection,
    target_metadata=metadatas(),
    version_table=VERSION_TABLE,
    render_as_batch=True,  # SQLite alters tables by copying them
    compare_type=True,
    on_version_apply=_report,
)
with context.begin_transaction():
    context.run_migrations()
