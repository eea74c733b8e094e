"""The sandbox's MariaDB databases: a private server in the state dir, or --db-url.

SQLite fails Nova and Placement under concurrent boots ("database is locked"), so
they get a real server, as do Cinder, Octavia, the Neutron of an OVN region and,
with ``--neutron-db mariadb``, every Neutron; the rest of the sandbox stays on SQLite.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from isthmus.sandbox import process
from isthmus.sandbox.layout import CENTRAL_REGION, Layout

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


def neutron_database(region: str) -> str:
    return f"neutron_{region.lower()}"


def database_names(layout: Layout) -> list[str]:
    names = [neutron_database(CENTRAL_REGION)] if layout.neutron_on_mariadb(CENTRAL_REGION) else []
    for region in layout.regions:
        key = region.lower()
        if layout.compute:
            names += [f"nova_api_{key}", f"nova_cell0_{key}", f"nova_{key}", f"placement_{key}"]
        if layout.volume:
            names.append(f"cinder_{key}")
        if layout.octavia:
            names.append(f"octavia_{key}")
        if layout.neutron_on_mariadb(region):
            names.append(neutron_database(region))
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


def _create_statement(layout: Layout, name: str) -> str:
    return f"CREATE DATABASE IF NOT EXISTS `{_db_name(layout, name)}` CHARACTER SET utf8mb4"


def create_databases(layout: Layout) -> None:
    engine = create_engine(_server_url(layout))
    try:
        with engine.connect() as conn:
            for name in database_names(layout):
                conn.execute(text(_create_statement(layout, name)))
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


# --- schema cache: dump a migrated database, load it into another ----------------------

def _find_client(*names: str) -> str | None:
    return next((path for path in map(shutil.which, names) if path), None)


def _client(*names: str) -> str:
    """The first of ``names`` on PATH (callers checked ``client_problem()`` first)."""
    found = _find_client(*names)
    if found is None:
        raise process.SandboxError(f"none of {', '.join(names)} found; run: {MARIADB_HINT}")
    return found


def client_problem() -> str:
    """Why dumps cannot be made or loaded here ("" when they can)."""
    missing = [tool for tool, names in (("mariadb", ("mariadb", "mysql")),
                                        ("mariadb-dump", ("mariadb-dump", "mysqldump"))) if not _find_client(*names)]
    return f"no {' or '.join(missing)} client" if missing else ""


def _client_args(layout: Layout) -> tuple[list[str], dict[str, str]]:
    """Connection options for the mariadb command-line tools, and their environment
    (the password goes in MYSQL_PWD, not on a command line others can read)."""
    server = make_url(_server_url(layout))
    args = ["--no-defaults"]
    socket = server.query.get("unix_socket")
    if socket:
        args.append(f"--socket={socket}")
    else:
        args += ["--protocol=TCP", f"--host={server.host or '127.0.0.1'}", f"--port={server.port or 3306}"]
    if server.username:
        args.append(f"--user={server.username}")
    env = dict(os.environ)
    env.pop("MYSQL_PWD", None)
    if server.password:
        env["MYSQL_PWD"] = str(server.password)
    return args, env


@functools.cache
def _server_version(server_url: str) -> str:
    engine = create_engine(server_url)
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("SELECT VERSION()")).scalar())
    finally:
        engine.dispose()


def server_version(layout: Layout) -> str:
    """e.g. 10.11.19-MariaDB-0+deb12u1: a dump is kept per server version."""
    return _server_version(_server_url(layout))


def dump(layout: Layout, name: str, path: Path) -> None:
    """One database's tables and rows, without its name (it loads under any name)."""
    args, env = _client_args(layout)
    with open(path, "wb") as out:
        result = subprocess.run([_client("mariadb-dump", "mysqldump"), *args, "--skip-dump-date", "--skip-comments",
                                 "--single-transaction", "--skip-lock-tables", _db_name(layout, name)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE, env=env, timeout=300)
    if result.returncode != 0:
        raise process.SandboxError(f"mariadb-dump {name}: {result.stderr.decode(errors='replace').strip()}")


def load(layout: Layout, name: str, data: bytes) -> None:
    """Run a dump into the (empty) database ``name``."""
    args, env = _client_args(layout)
    result = subprocess.run([_client("mariadb", "mysql"), *args, "--batch", _db_name(layout, name)], input=data,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=300)
    if result.returncode != 0:
        lines = [line for line in result.stderr.decode(errors="replace").splitlines() if line.strip("- ")]
        error = next((line for line in lines if line.startswith("ERROR")), lines[-1] if lines else "")
        raise process.SandboxError(f"loading {name}: {error or f'exit {result.returncode}'}")


def recreate(layout: Layout, name: str) -> None:
    """Empty one database again (after a load that failed half-way)."""
    engine = create_engine(_server_url(layout))
    try:
        with engine.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{_db_name(layout, name)}`"))
            conn.execute(text(_create_statement(layout, name)))
    finally:
        engine.dispose()


def execute(layout: Layout, name: str, statements: list[tuple[str, dict]]) -> None:
    """Run a few statements in one transaction on database ``name``."""
    engine = create_engine(url(layout, name))
    try:
        with engine.begin() as conn:
            for statement, params in statements:
                conn.execute(text(statement), params)
    finally:
        engine.dispose()


def scalar(layout: Layout, name: str, statement: str, params: dict):
    """One value from database ``name``."""
    engine = create_engine(url(layout, name))
    try:
        with engine.connect() as conn:
            return conn.execute(text(statement), params).scalar()
    finally:
        engine.dispose()


def provide(layout: Layout, cache, label: str, entry: str, targets: list[str], migrate, after_load=None) -> str:
    """The schema of ``targets`` (databases of the same schema): loaded from the
    cache's dump ``entry`` (then ``after_load()``, which may fail like a load),
    or ``migrate()``d and the first target dumped into it."""
    problem = client_problem() if cache.enabled else ""
    name = None if problem else schema_entry(layout, entry) if cache.enabled else None

    def load_all(data: bytes) -> None:
        for target in targets:
            load(layout, target, data)
        if after_load is not None:
            after_load()

    def reset() -> None:
        for target in targets:
            recreate(layout, target)

    return cache.provide(label, name, load_all, migrate, lambda path: dump(layout, targets[0], path), reset,
                         why_not=problem)


def schema_entry(layout: Layout, entry: str) -> str:
    from isthmus.sandbox.schema_cache import sql_entry

    return sql_entry(entry, server_version(layout))
