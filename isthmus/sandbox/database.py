"""Nova's and Placement's databases: a private MariaDB in the state dir, or --db-url.

SQLite fails Nova and Placement under concurrent boots ("database is locked"), so
they get a real server; everything else in the sandbox stays on SQLite.
"""

from __future__ import annotations

import shutil

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from isthmus.sandbox import process
from isthmus.sandbox.layout import Layout

MARIADB_HINT = "apt-get install -y mariadb-server"


def _server_url(layout: Layout) -> str:
    if layout.db_url:
        return layout.db_url
    return f"mysql+pymysql://root@127.0.0.1:{layout.mariadb_port}/"


def _db_name(layout: Layout, name: str) -> str:
    if layout.db_url:
        # A shared server may host several sandboxes: prefix with this sandbox's id.
        return f"{layout.rabbit_vhost_prefix.replace('-', '_')}_{name}"
    return name


def url(layout: Layout, name: str) -> str:
    server = make_url(_server_url(layout))
    return server.set(database=_db_name(layout, name)).render_as_string(hide_password=False)


def database_names(layout: Layout) -> list[str]:
    names = []
    for region in layout.regions:
        key = region.lower()
        names += [f"nova_api_{key}", f"nova_cell0_{key}", f"nova_{key}", f"placement_{key}", f"cinder_{key}"]
        if layout.octavia:
            names.append(f"octavia_{key}")
    return names


def start_private(layout: Layout) -> process.ServiceRecord | None:
    """Initialise and start the sandbox's own MariaDB (well under a second)."""
    if layout.db_url:
        return None
    for binary in ("mariadb-install-db", "mariadbd"):
        if not shutil.which(binary):
            raise process.SandboxError(f"{binary} not found; run: {MARIADB_HINT} (or pass --db-url)")
    datadir = layout.data / "mariadb"
    log = layout.logs / "mariadb.log"
    if not datadir.exists():
        process.run([
            "mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=root",
            "--auth-root-authentication-method=normal", "--skip-test-db",
        ], log, what="mariadb-install-db")
    mariadbd = shutil.which("mariadbd")
    assert mariadbd is not None  # checked above
    record = process.start("mariadb", [
        mariadbd, "--no-defaults", f"--datadir={datadir}", f"--socket={layout.run / 'mariadb.sock'}",
        f"--port={layout.mariadb_port}", "--bind-address=127.0.0.1", "--user=root",
        f"--pid-file={layout.run / 'mariadb.pid'}", "--skip-name-resolve", "--max-connections=1000",
        "--innodb-buffer-pool-size=128M", "--innodb-flush-log-at-trx-commit=2", "--skip-log-bin",
        "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
    ], log=log, run_dir=layout.run, port=layout.mariadb_port)
    process.wait_until(lambda: process.port_is_listening(layout.mariadb_port),
                       f"waiting for mariadb on port {layout.mariadb_port}", 60, record)
    return record


def create_databases(layout: Layout) -> None:
    engine = create_engine(_server_url(layout))
    try:
        with engine.connect() as conn:
            for name in database_names(layout):
                conn.execute(text(f"CREATE DATABASE IF NOT EXISTS `{_db_name(layout, name)}` CHARACTER SET utf8mb4"))
    except Exception as err:
        raise process.SandboxError(f"cannot create databases on {make_url(_server_url(layout))!r}: {err}") from err
    finally:
        engine.dispose()


def drop_databases(layout: Layout) -> None:
    """Only for --db-url: a private MariaDB goes away with the state dir."""
    if not layout.db_url:
        return
    engine = create_engine(_server_url(layout))
    try:
        with engine.connect() as conn:
            for name in database_names(layout):
                conn.execute(text(f"DROP DATABASE IF EXISTS `{_db_name(layout, name)}`"))
    except Exception:  # noqa: BLE001 - best effort at teardown
        pass
    finally:
        engine.dispose()
