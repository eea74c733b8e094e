"""The isthmus-xjob entry point: options, handler loading, engine setup."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import sqlalchemy as sa

from isthmus.db import is_transient, migration, skip_locked_supported
from isthmus.jobs import HandlerRegistry, RetryPolicy, loader, make_engine
from isthmus.jobs.config import DEFAULT_CONNECTION, list_opts, retry_policy
from isthmus.jobs.worker import build_worker, load_conf, main, settings_from_conf


def _conf_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "isthmus.conf"
    path.write_text(body)
    return str(path)


def test_options_from_config_file(tmp_path: Path) -> None:
    conf = load_conf(["--config-file", _conf_file(tmp_path, (
        "[database]\nconnection = sqlite:///x.db\n"
        "[jobs]\nworkers = 7\nlease_seconds = 90\npoll_interval = 0.5\nshutdown_grace = 12\n"
        "max_attempts = 4\nretry_base_delay = 1.5\nretry_max_delay = 45\nretry_jitter = 0\n"
        "resync_enabled = false\nworker_name = xjob-1\nrun_deadline = 45\n"
    ))])
    settings = settings_from_conf(conf)
    assert conf.database.connection == "sqlite:///x.db"
    assert (settings.concurrency, settings.lease_seconds, settings.poll_interval) == (7, 90.0, 0.5)
    assert (settings.shutdown_grace, settings.resync, settings.owner) == (12.0, False, "xjob-1")
    assert settings.run_deadline == 45.0
    assert retry_policy(conf) == RetryPolicy(max_attempts=4, base_delay=1.5, max_delay=45.0, jitter=0.0)


def test_defaults() -> None:
    conf = load_conf([])
    settings = settings_from_conf(conf)
    assert conf.database.connection == DEFAULT_CONNECTION
    assert (settings.concurrency, settings.lease_seconds, conf.jobs.max_attempts) == (4, 60.0, 8)
    assert settings.run_deadline == 300.0
    assert settings.owner.count(":") == 2  # host:pid:random
    assert {group for group, _ in list_opts()} == {"database", "jobs", "metrics"}


def test_build_worker_loads_handler_modules(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ISTHMUS_JOBS_TEST_DIR", str(tmp_path))
    url = f"sqlite:///{tmp_path}/jobs.sqlite"
    migration.upgrade(make_engine(url))
    conf = load_conf(["--config-file", _conf_file(tmp_path, (
        f"[database]\nconnection = {url}\n"
        "[jobs]\nload_entry_points = false\nhandler_modules = tests.unit.jobs.proc_handlers\n"
    ))])
    worker = build_worker(conf)
    assert worker.runner.registry.job_types() == ("crashy", "guarded", "polite", "stubborn")
    assert {"isthmus_jobs", "isthmus_job_schedules"} <= set(sa.inspect(worker.leases.engine).get_table_names())
    worker.leases.engine.dispose()


def test_main_refuses_to_run_without_handlers(tmp_path: Path) -> None:
    migration.upgrade(make_engine(f"sqlite:///{tmp_path}/jobs.sqlite"))
    path = _conf_file(tmp_path, (
        f"[database]\nconnection = sqlite:///{tmp_path}/jobs.sqlite\n[jobs]\nload_entry_points = false\n"
    ))
    assert main(["--config-file", path]) == 2


def test_loader_requires_the_hook(monkeypatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "no_hook_here", types.ModuleType("no_hook_here"))
    with pytest.raises(ValueError, match="register_handlers"):
        loader.load_handlers(HandlerRegistry(), ["no_hook_here"], use_entry_points=False)


def test_loader_calls_entry_points(monkeypatch) -> None:
    class FakeEntryPoint:
        def load(self):
            return lambda registry: registry.register("port_delete", lambda ctx: None)

    monkeypatch.setattr(loader, "entry_points",
                        lambda group: [FakeEntryPoint()] if group == loader.ENTRY_POINT_GROUP else [])
    registry = loader.load_handlers(HandlerRegistry())
    assert registry.job_types() == ("port_delete",)


def test_sqlite_engine_uses_wal_and_a_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/x.sqlite", busy_timeout=7)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 7000
    engine.dispose()


def _dialect(name: str, version: tuple, mariadb: bool = False):
    return types.SimpleNamespace(name=name, server_version_info=version, is_mariadb=mariadb)


def test_skip_locked_only_where_the_server_has_it() -> None:
    assert skip_locked_supported(_dialect("postgresql", (15, 2)))
    assert skip_locked_supported(_dialect("mysql", (10, 11, 6), mariadb=True))
    assert not skip_locked_supported(_dialect("mysql", (10, 5, 0), mariadb=True))
    assert skip_locked_supported(_dialect("mysql", (8, 0, 30)))
    assert not skip_locked_supported(_dialect("sqlite", (3, 45)))


def test_transient_errors() -> None:
    def wrap(orig: Exception) -> sa.exc.DBAPIError:
        return sa.exc.OperationalError("stmt", {}, orig)

    deadlock = Exception(1213, "Deadlock found")
    class PgError(Exception):
        pgcode = "40001"  # psycopg2's SQLSTATE attribute

    pg = PgError("could not serialize")
    assert is_transient(wrap(deadlock)) and is_transient(wrap(pg))
    assert is_transient(wrap(Exception("database is locked")))
    assert not is_transient(wrap(Exception(1146, "Table doesn't exist")))
    assert not is_transient(ValueError("not a db error"))
