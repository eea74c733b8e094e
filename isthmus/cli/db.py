"""``isthmus db upgrade|current|check``: the Isthmus database's versioned schema.

The database is found as the services find it: ``--db-url``, else
``[isthmus] database_connection`` (central neutron-server's file), else
``[database] connection`` (isthmus-admin, isthmus-xjob, isthmus-gateway), read
from the ``--config-file`` files in order.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("db", help="the Isthmus database schema (versioned migrations)")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    commands = parser.add_subparsers(dest="db_command", metavar="COMMAND")
    for name, func, text in (
        ("upgrade", run_upgrade, "carry the schema forward to the code's head (idempotent)"),
        ("current", run_current, "print the schema's revision and the code's head"),
        ("check", run_check, "exit 1 with one line if the schema is behind the code or differs from it"),
    ):
        cmd = commands.add_parser(name, help=text, description=text)
        cmd.add_argument("--config-file", action="append", default=[], metavar="FILE",
                         help="a service's configuration file (repeatable; later files win)")
        cmd.add_argument("--db-url", metavar="URL", help="SQLAlchemy URL; overrides the configuration files")
        if name == "upgrade":
            cmd.add_argument("--revision", default="head", help="target revision (default: head)")
        cmd.set_defaults(func=func)


def database_url(config_files: list[str], db_url: str | None) -> str:
    if db_url:
        return db_url
    from oslo_config import cfg

    from isthmus.jobs import config as jobs_config
    from isthmus.network import config as network_config

    conf = cfg.ConfigOpts()
    jobs_config.register_opts(conf)
    conf.register_opts(network_config.OPTS, group=network_config.GROUP)
    conf([], project="isthmus", default_config_files=config_files)
    return conf.isthmus.database_connection or conf.database.connection


def _engine(args: argparse.Namespace):
    from isthmus.db import make_engine

    return make_engine(database_url(args.config_file, args.db_url))


def _fail(message: str) -> int:
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return 1


def run_upgrade(args: argparse.Namespace) -> int:
    from isthmus.db import migration

    try:
        engine = _engine(args)
        url = engine.url.render_as_string(hide_password=True)
        before = migration.inspect(engine)
        print(f"Isthmus database {url} {before.describe()}", flush=True)
        after = migration.upgrade(engine, args.revision, progress=lambda line: print(line, flush=True))
    except Exception as exc:  # noqa: BLE001 - one line whatever failed (bad URL, server down, bad revision)
        return _fail(str(exc))
    print(f"Isthmus database {after.describe()}")
    return 0


def run_current(args: argparse.Namespace) -> int:
    from isthmus.db import migration

    try:
        state = migration.inspect(_engine(args))
    except Exception as exc:  # noqa: BLE001 - one line whatever failed
        return _fail(str(exc))
    print(f"current: {state.current or '-'}\nhead: {state.head}\nstatus: {state.status}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    from isthmus.db import migration

    try:
        engine = _engine(args)
        state = migration.inspect(engine)
        if not state.usable:
            return _fail(f"the Isthmus database {state.describe()}: run '{migration.UPGRADE_COMMAND}'")
        differences = migration.drift(engine) if state.status is migration.SchemaStatus.CURRENT else []
    except Exception as exc:  # noqa: BLE001 - one line whatever failed
        return _fail(str(exc))
    if differences:
        return _fail(f"the Isthmus database is at {state.current} but differs from the code: {differences[0]}"
                     f"{f' (+{len(differences) - 1} more)' if len(differences) > 1 else ''}")
    print(f"Isthmus database {state.describe()}")
    return 0
