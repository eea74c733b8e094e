"""WSGI application factories for gunicorn: ``isthmus.sandbox.wsgi:neutron()``.

Keystone, Neutron and Nova parse ``sys.argv`` with oslo.config while building their
app, and gunicorn's own arguments make them exit; each factory clears argv first.
Configuration comes from the environment variables each service documents
(``OS_<SERVICE>_CONFIG_DIR``/``_FILES``), set by the sandbox when it starts gunicorn.
"""

from __future__ import annotations

import sys


def _clear_argv(prog: str) -> None:
    sys.argv = [prog]
    _serialize_sqlite_transactions()


def _serialize_sqlite_transactions() -> None:
    """Make SQLite hold up under a threaded API server.

    pysqlite opens transactions lazily and upgrades read locks to write locks, so two
    threads that read then write fail at once with "database is locked" (no busy wait
    applies to an upgrade); Neutron does not retry that error. Starting every
    transaction with BEGIN IMMEDIATE makes them queue on the write lock (with a busy
    timeout) instead. Readers outside transactions still run concurrently (WAL).
    """
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        if isinstance(dbapi_conn, sqlite3.Connection):
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            dbapi_conn.execute("PRAGMA busy_timeout = 120000")
            dbapi_conn.execute("PRAGMA journal_mode = WAL")

    # oslo.db emits its own plain BEGIN unless conn.info says a transaction is open;
    # class-level listeners run first, so ours wins and oslo.db's sees the flag.
    @event.listens_for(Engine, "begin")
    def _on_begin(conn) -> None:
        if getattr(conn.engine, "isthmus_begins_itself", False):
            return  # Isthmus' own engines (isthmus.db) already begin IMMEDIATE where needed
        if conn.dialect.name == "sqlite" and "in_transaction" not in conn.info:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            conn.info["in_transaction"] = True

    @event.listens_for(Engine, "commit")
    @event.listens_for(Engine, "rollback")
    def _on_end(conn) -> None:
        conn.info.pop("in_transaction", None)


def keystone():
    _clear_argv("keystone")
    from keystone.server import wsgi

    return wsgi.initialize_public_application()


def neutron():
    _clear_argv("neutron-api")
    from neutron import server
    from neutron.server import api

    return server.boot_server(api.api_server, prog="neutron-api")


def nova_api():
    _clear_argv("nova-api")
    from nova.wsgi import osapi_compute

    return osapi_compute.application


def placement():
    _clear_argv("placement-api")
    from placement.wsgi import api

    return api.application


def glance():
    _clear_argv("glance-api")
    from glance.wsgi import api

    return api.application


def isthmus_admin():
    # Not _clear_argv: Isthmus' own engines begin their SQLite transactions themselves.
    sys.argv = ["isthmus-admin"]
    from isthmus.admin import wsgi

    return wsgi.init_application()


def cinder():
    _clear_argv("cinder-api")
    from cinder.wsgi import api

    return api.application
