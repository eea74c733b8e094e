"""Alembic environment: run on the connection ``isthmus.db.migration`` hands in.

There is no alembic.ini and no URL here: the caller owns the engine (with the
SQLite tuning of ``isthmus.db.engine``) and the transaction.
"""

from alembic import context

from isthmus.db.migration import VERSION_TABLE
from isthmus.db.schema import metadatas

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError("Isthmus migrations run online only, through isthmus.db.migration")
progress = config.attributes.get("progress")


def _report(ctx, step, heads, run_args) -> None:  # noqa: ANN001 - alembic's callback signature
    if progress is not None:
        progress(f"applied {step.up_revision_id}: {step.up_revision.doc.splitlines()[0]}")


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
