"""``isthmus db`` as an operator runs it, and every service's start-up check."""

from __future__ import annotations

from pathlib import Path

import pytest

from isthmus.cli.main import main as isthmus
from isthmus.db import make_engine, migration


def _conf(tmp_path: Path, body: str, name: str = "isthmus.conf") -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


def test_check_upgrade_current_with_a_service_config_file(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path}/isthmus.sqlite"
    conf = _conf(tmp_path, f"[database]\nconnection = {url}\n")
    assert isthmus(["db", "check", "--config-file", conf]) == 1
    assert "is empty" in _one_line_error(capsys)
    assert isthmus(["db", "upgrade", "--config-file", conf]) == 0
    out = capsys.readouterr().out
    assert f"applied {migration.head_revision()}" in out and "(head)" in out.splitlines()[-1]
    assert isthmus(["db", "check", "--config-file", conf]) == 0
    assert isthmus(["db", "current", "--config-file", conf]) == 0
    assert f"current: {migration.head_revision()}" in capsys.readouterr().out


def test_check_names_the_command_to_run(tmp_path: Path, capsys) -> None:
    assert isthmus(["db", "check", "--db-url", f"sqlite:///{tmp_path}/x.sqlite"]) == 1
    assert _one_line_error(capsys).endswith("run 'isthmus db upgrade'")


def test_central_plugin_option_wins_over_neutrons_own_database(tmp_path: Path, capsys) -> None:
    """neutron.conf's [database] is Neutron's: with the central plugin's
    [isthmus] database_connection in the same file, that one is the Isthmus DB."""
    neutron_db = tmp_path / "neutron.sqlite"
    isthmus_db = tmp_path / "isthmus.sqlite"
    conf = _conf(tmp_path, f"[database]\nconnection = sqlite:///{neutron_db}\n"
                           f"[isthmus]\ndatabase_connection = sqlite:///{isthmus_db}\n", "neutron.conf")
    assert isthmus(["db", "upgrade", "--config-file", conf]) == 0
    assert isthmus_db.exists() and not neutron_db.exists()


def test_check_fails_on_drift(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path}/x.sqlite"
    assert isthmus(["db", "upgrade", "--db-url", url]) == 0
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX ix_isthmus_jobs_claim")
    engine.dispose()
    capsys.readouterr()
    assert isthmus(["db", "check", "--db-url", url]) == 1
    assert "differs from the code" in _one_line_error(capsys)


def test_bad_url_is_one_line(capsys) -> None:
    assert isthmus(["db", "upgrade", "--db-url", "nosuchdialect://x"]) == 1
    assert _one_line_error(capsys).startswith("error: ")


@pytest.fixture
def empty_sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/isthmus.sqlite"


def test_xjob_refuses_an_unmigrated_database(tmp_path: Path, empty_sqlite: str, caplog) -> None:
    from isthmus.jobs.worker import build_worker, load_conf, main

    path = _conf(tmp_path, f"[database]\nconnection = {empty_sqlite}\n")
    with pytest.raises(migration.SchemaOutdated, match="isthmus-xjob: .*run 'isthmus db upgrade'"):
        build_worker(load_conf(["--config-file", path]))
    assert main(["--config-file", path]) == 2
    assert "isthmus db upgrade" in caplog.text


def test_admin_api_refuses_an_unmigrated_database(tmp_path: Path, empty_sqlite: str) -> None:
    from isthmus.admin import wsgi

    conf = wsgi.make_conf([], [_conf(tmp_path, f"[database]\nconnection = {empty_sqlite}\n")])
    with pytest.raises(migration.SchemaOutdated, match="isthmus-admin: "):
        wsgi.build_app(conf)
    assert wsgi.main(["--config-file", _conf(tmp_path, f"[database]\nconnection = {empty_sqlite}\n", "b.conf")]) == 2


def test_gateway_refuses_an_unmigrated_database(tmp_path: Path, empty_sqlite: str) -> None:
    from isthmus.gateway import service

    assert service.main(["--config-file", _conf(tmp_path, f"[database]\nconnection = {empty_sqlite}\n")]) == 2


def test_central_plugin_refuses_an_unmigrated_database(empty_sqlite: str) -> None:
    from isthmus.network.central.state import CentralState

    with pytest.raises(migration.SchemaOutdated, match=r"neutron-server \(isthmus central plugin\)"):
        CentralState(empty_sqlite)
    migration.upgrade(make_engine(empty_sqlite))
    assert CentralState(empty_sqlite).pods() == []
