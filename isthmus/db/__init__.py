"""The Isthmus database: engines and transactions (``engine``), the versioned
schema (``migration``, Alembic scripts under ``migrations/``).

Components import the engine helpers from here; only ``isthmus db`` and the
services' start-up check touch migrations.
"""

from isthmus.db.engine import (
    database_now,
    is_transient,
    make_engine,
    read_tx,
    retry_transient,
    skip_locked_supported,
    write_tx,
)

__all__ = ["database_now", "is_transient", "make_engine", "read_tx", "retry_transient", "skip_locked_supported",
           "write_tx"]
