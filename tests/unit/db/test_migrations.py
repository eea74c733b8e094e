"""Versioned migrations: rows survive upgrades, the migrated schema is the
models' schema, and services refuse a schema older than their code."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from isthmus import jobs, registry
from isthmus.db import make_engine, migration
from isthmus.jobs.models import JobStatus
from isthmus.registry.bindings import Bindings

BASELINE = "0001"
T0 = datetime(2026, 11, 30, 12, 0, 0, 123456)  # microseconds must survive (MariaDB DATETIME(6))


def _insert(conn: sa.Connection, table: str, rows: list[dict]) -> None:
    """Through the table as the database has it (reflected), never through today's
    models: the rows must fit the *old* schema whatever the code looks like now."""
    reflected = sa.Table(table, sa.MetaData(), autoload_with=conn)
    # MariaDB reflects JSON as LONGTEXT: hand it the text the JSON type would write.
    text_cols = {c.name for c in reflected.columns if not isinstance(c.type, sa.JSON)}
    rows = [{k: json.dumps(v) if isinstance(v, dict) and k in text_cols else v for k, v in row.items()}
            for row in rows]
    conn.execute(reflected.insert(), rows)


def _fill(engine: sa.Engine) -> dict[str, list[dict]]:
    pods = [
        {"pod_id": "pod-central", "region_name": "CentralRegion", "az_name": "", "pod_az_name": "", "dc_name": ""},
        {"pod_id": "pod-one", "region_name": "RegionOne", "az_name": "az1", "pod_az_name": "az1-a", "dc_name": "dc1"},
    ]
    routings = [
        {"id": n, "top_id": f"top-{n}", "bottom_id": f"top-{n}" if n != 3 else None, "pod_id": "pod-one",
         "project_id": "p1", "resource_type": kind, "created_at": T0, "updated_at": T0 + timedelta(seconds=n)}
        for n, kind in ((1, "network"), (2, "subnet"), (3, "port"), (4, "security_group"))
    ]
    bindings = [{"id": 1, "project_id": "p1", "pod_id": "pod-one", "created_at": T0}]
    job_rows = []
    for n, status in enumerate(JobStatus):
        running = status is JobStatus.RUNNING
        job_rows.append({
            "id": f"00000000-0000-0000-0000-00000000000{n}", "job_type": "network_sync", "resource_id": f"net-{n}",
            "project_id": "p1", "payload": {"reason": status.value, "n": n}, "status": status.value,
            "attempt": n, "failures": n % 2, "rerun": running,
            "last_error": "boom" if status is JobStatus.FAIL else None,
            "run_after": T0, "lease_owner": "host:1:abc" if running else None,
            "lease_token": "11111111-1111-1111-1111-111111111111" if running else None,
            "lease_expires_at": T0 + timedelta(minutes=1) if running else None,
            "created_at": T0, "updated_at": T0, "started_at": T0 if status is not JobStatus.NEW else None,
            "finished_at": T0 if status in (JobStatus.SUCCESS, JobStatus.FAIL) else None, "version": n + 1,
        })
    schedules = [{"name": "network_sync", "next_run_at": T0, "last_owner": "host:1:abc"}]
    filled: dict[str, list[dict]] = {
        "isthmus_pods": pods, "isthmus_routings": routings, "isthmus_pod_bindings": bindings,
        "isthmus_jobs": job_rows, "isthmus_job_schedules": schedules}
    with engine.begin() as conn:
        for table, rows in filled.items():
            _insert(conn, table, rows)
    return filled


def _check_rows_survived(engine: sa.Engine, filled: dict[str, list[dict]]) -> None:
    """Read back through the product's own stores, as the services will."""
    reg = registry.Registry(engine)
    assert {(p.pod_id, p.region_name, p.az_name, p.pod_az_name, p.dc_name) for p in reg.pods()} == {
        tuple(row.values()) for row in filled["isthmus_pods"]}
    for row in filled["isthmus_routings"]:
        routing = reg.get_routing(row["id"])
        assert (routing.top_id, routing.bottom_id, routing.pod_id, routing.resource_type) == (
            row["top_id"], row["bottom_id"], row["pod_id"], row["resource_type"])
        assert routing.updated_at.replace(tzinfo=None) == row["updated_at"]
    assert [(b.project_id, b.pod_id) for b in Bindings(engine).list()] == [("p1", "pod-one")]
    store = jobs.JobStore(engine)
    for row in filled["isthmus_jobs"]:
        job = store.get(row["id"])
        assert (job.status.value, dict(job.payload), job.attempt, job.failures, job.rerun, job.last_error,
                job.lease_token, job.version) == (row["status"], row["payload"], row["attempt"], row["failures"],
                                                  row["rerun"], row["last_error"], row["lease_token"], row["version"])
        assert job.run_after == T0.replace(tzinfo=UTC)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT name, last_owner FROM isthmus_job_schedules")).all() == [
            ("network_sync", "host:1:abc")]


def test_rows_at_the_baseline_survive_the_upgrade_to_head(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        assert migration.upgrade(engine, BASELINE).current == BASELINE
        filled = _fill(engine)
        state = migration.upgrade(engine)
        assert state.status is migration.SchemaStatus.CURRENT and state.current == migration.head_revision()
        _check_rows_survived(engine, filled)
    finally:
        engine.dispose()


def test_migrated_schema_is_the_models_schema(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        migration.upgrade(engine)
        assert migration.drift(engine) == []
    finally:
        engine.dispose()


def test_drift_is_seen(tmp_path: Path) -> None:
    """The drift check can fail: a column the models lack is reported."""
    engine = make_engine(f"sqlite:///{tmp_path}/x.sqlite")
    migration.upgrade(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE isthmus_pods ADD COLUMN stray VARCHAR(10)")
        conn.exec_driver_sql("DROP INDEX ix_isthmus_jobs_project")
    kinds = sorted(diff[0] for diff in migration.drift(engine))
    assert kinds == ["add_index", "remove_column"]
    engine.dispose()


def test_database_from_before_migrations_is_adopted(tmp_path: Path) -> None:
    """An earlier Isthmus made its tables with create_all at start (the gateway only
    the registry's): upgrade keeps their rows and adds what is missing."""
    engine = make_engine(f"sqlite:///{tmp_path}/old.sqlite")
    # What that release's create_all made: the baseline's tables, no version table.
    migration.upgrade(engine, BASELINE)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE {migration.VERSION_TABLE}")
        conn.exec_driver_sql("DROP TABLE isthmus_jobs")  # the gateway made only the registry's
    reg = registry.Registry(engine)
    pod = reg.create_pod("RegionOne", "az1")
    assert migration.inspect(engine).status is migration.SchemaStatus.UNVERSIONED
    assert migration.upgrade(engine).status is migration.SchemaStatus.CURRENT
    assert reg.pods() == [pod]
    assert migration.drift(engine) == []
    assert jobs.JobStore(engine).counts() is not None
    engine.dispose()


def test_upgrade_is_idempotent(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/x.sqlite")
    applied: list[str] = []
    migration.upgrade(engine, progress=applied.append)
    migration.upgrade(engine, progress=applied.append)
    assert len(applied) == len(list(migration.script().walk_revisions()))
    engine.dispose()


def _stamp(engine: sa.Engine, revision: str) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {migration.VERSION_TABLE} SET version_num = :r"), {"r": revision})


def test_require_current(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/x.sqlite")
    with pytest.raises(migration.SchemaOutdated, match=r"isthmus-xjob: .* is empty.*run 'isthmus db upgrade'"):
        migration.require_current(engine, "isthmus-xjob")
    migration.upgrade(engine)
    assert migration.require_current(engine, "isthmus-xjob").status is migration.SchemaStatus.CURRENT
    # Newer than the code (a rolling upgrade migrated first): old services keep running.
    _stamp(engine, "9999_from_the_future")
    assert migration.require_current(engine, "isthmus-xjob").status is migration.SchemaStatus.AHEAD
    engine.dispose()


def test_behind_is_refused(tmp_path: Path, monkeypatch) -> None:
    """A database at an older known revision: pretend the code's head moved on."""
    engine = make_engine(f"sqlite:///{tmp_path}/x.sqlite")
    migration.upgrade(engine)
    real_head = migration.head_revision()
    monkeypatch.setattr(migration, "head_revision", lambda: "0002_next")
    monkeypatch.setattr(migration, "_known", lambda scripts, rev: rev == real_head)
    state = migration.inspect(engine)
    assert state.status is migration.SchemaStatus.BEHIND
    with pytest.raises(migration.SchemaOutdated, match=f"at {real_head}, behind this code's head 0002_next"):
        migration.require_current(engine, "isthmus-gateway")
    engine.dispose()
