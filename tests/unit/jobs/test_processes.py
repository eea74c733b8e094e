"""Worker processes (``python -m isthmus.jobs``, i.e. ``worker.main``) sharing one database.

Covers what threads cannot: two processes competing for keys, SIGKILL in the
middle of a handler (the orphaned job is taken over after its lease expires),
and SIGTERM handling of the real entry point.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from isthmus.jobs import JobStatus, JobStore, make_engine

from .helpers import wait_for
from .proc_handlers import lines

pytestmark = pytest.mark.component  # job-worker processes (tests/tiers.py)

REPO = Path(__file__).resolve().parents[3]


class WorkerProcesses:
    """Starts worker processes for one test and kills leftovers at teardown."""

    def __init__(self, workdir: Path, db_url: str) -> None:
        self.workdir = workdir
        self.db_url = db_url
        self.procs: list[subprocess.Popen] = []

    def start(self, name: str, *, lease: float = 30.0, workers: int = 3, grace: float = 5.0,
              metrics_port: int = 0, takeover_grace: float = 0.5) -> subprocess.Popen:
        conf = self.workdir / f"{name}.conf"
        conf.write_text(
            "[database]\n"
            f"connection = {self.db_url}\n"
            "[jobs]\n"
            f"workers = {workers}\n"
            f"lease_seconds = {lease}\n"
            f"takeover_grace = {takeover_grace}\n"
            "poll_interval = 0.02\n"
            f"shutdown_grace = {grace}\n"
            "retry_jitter = 0\n"
            "load_entry_points = false\n"
            "handler_modules = tests.unit.jobs.proc_handlers\n"
            f"worker_name = {name}\n"
            f"[metrics]\nport = {metrics_port}\n"
        )
        env = {**os.environ, "PYTHONPATH": str(REPO), "ISTHMUS_JOBS_TEST_DIR": str(self.workdir)}
        log = open(self.workdir / f"{name}.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "isthmus.jobs", "--config-file", str(conf)],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def procs(tmp_path: Path, db_url: str) -> Iterator[WorkerProcesses]:
    manager = WorkerProcesses(tmp_path, db_url)
    yield manager
    manager.stop_all()


@pytest.fixture
def sqlite_procs(tmp_path: Path, sqlite_url: str) -> Iterator[WorkerProcesses]:
    manager = WorkerProcesses(tmp_path, sqlite_url)
    yield manager
    manager.stop_all()


@pytest.fixture
def jobs_of(request) -> Iterator:
    engines = []

    def open_store(manager: WorkerProcesses) -> JobStore:
        engines.append(make_engine(manager.db_url))
        return JobStore(engines[-1])

    yield open_store
    for engine in engines:
        engine.dispose()


def _idle(store: JobStore) -> bool:
    counts = store.counts()
    return counts[JobStatus.NEW] == 0 and counts[JobStatus.RUNNING] == 0


def test_two_processes_never_run_one_key_at_once(procs: WorkerProcesses, jobs_of) -> None:
    store = jobs_of(procs)
    keys = [f"net-{n}" for n in range(8)]
    last_seq = {}
    for seq, key in enumerate(keys):
        store.enqueue("guarded", key, payload={"seq": seq})
        last_seq[key] = seq
    procs.start("proc-a")
    procs.start("proc-b")
    runs = procs.workdir / "runs"
    # 3 slots per process and handlers held at the gate: 6 runs in flight, so
    # both processes must be running jobs at the same time.
    wait_for(lambda: len(lines(runs)) == 6)
    assert len({line.split()[2] for line in lines(runs)}) == 2
    for seq, key in enumerate(keys * 2, start=len(keys)):  # events while they run
        store.enqueue("guarded", key, payload={"seq": seq})
        last_seq[key] = seq
    (procs.workdir / "go").touch()
    wait_for(lambda: _idle(store))

    assert lines(procs.workdir / "violations") == []
    seen: dict[str, list[int]] = {}
    for line in lines(runs):
        key, seq_text, _pid = line.split()
        seen.setdefault(key, []).append(int(seq_text))
    assert set(seen) == set(keys)
    for key in keys:
        assert seen[key][-1] == last_seq[key]  # every key reconciled to its newest event
        assert len(seen[key]) <= 2  # first run + one coalesced follow-up at most
    assert {j.status for j in store.list()} == {JobStatus.SUCCESS}


def test_job_killed_mid_run_is_taken_over_and_completes_once(procs: WorkerProcesses, jobs_of) -> None:
    store = jobs_of(procs)
    job = store.enqueue("crashy", "port-1", project_id="p1")
    victim = procs.start("victim", lease=1.0)
    wait_for(lambda: len(lines(procs.workdir / "started")) == 1)
    assert store.get(job.id).status is JobStatus.RUNNING
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)

    procs.start("rescuer")
    wait_for(lambda: store.get(job.id).status is JobStatus.SUCCESS)

    done = store.get(job.id)
    assert done.attempt == 2 and done.failures == 1 and done.lease_owner is None
    runs = [line.split() for line in lines(procs.workdir / "runs")]
    assert [(key, attempt) for key, attempt, _ in runs] == [("port-1", "1"), ("port-1", "2")]
    assert runs[0][2] == str(victim.pid) and runs[1][2] != str(victim.pid)
    assert lines(procs.workdir / "creations") == ["port-1"]  # no duplicate resource


def test_sigterm_lets_the_running_job_finish(sqlite_procs: WorkerProcesses, jobs_of) -> None:
    store = jobs_of(sqlite_procs)
    job = store.enqueue("polite", "net-1")
    proc = sqlite_procs.start("worker")
    wait_for(lambda: len(lines(sqlite_procs.workdir / "started")) == 1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert lines(sqlite_procs.workdir / "finished") == ["net-1"]
    assert store.get(job.id).status is JobStatus.SUCCESS


def test_sigterm_releases_a_job_that_does_not_stop(sqlite_procs: WorkerProcesses, jobs_of) -> None:
    store = jobs_of(sqlite_procs)
    job = store.enqueue("stubborn", "net-1")
    proc = sqlite_procs.start("worker", grace=0.2)
    wait_for(lambda: len(lines(sqlite_procs.workdir / "started")) == 1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    released = store.get(job.id)
    assert released.status is JobStatus.NEW and released.lease_owner is None
    assert released.attempt == 1 and released.failures == 0


def test_metrics_endpoint_of_the_worker_process(sqlite_procs: WorkerProcesses, jobs_of) -> None:
    """``[metrics] port``: the real worker serves /metrics; scraped after three known jobs."""
    import socket
    import urllib.request

    store = jobs_of(sqlite_procs)
    (sqlite_procs.workdir / "go").write_text("")  # guarded jobs run straight through
    for n in range(3):
        store.enqueue("guarded", f"net-{n}", payload={"seq": n})
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sqlite_procs.start("worker", metrics_port=port)
    wait_for(lambda: store.counts()[JobStatus.SUCCESS] == 3)

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return resp.read().decode()

    text = wait_for_text(scrape, 'isthmus_job_runs_total{outcome="success",type="guarded"} 3.0')
    assert 'isthmus_jobs{state="SUCCESS",type="guarded"} 3.0' in text
    assert 'isthmus_job_run_seconds_count{type="guarded"} 3.0' in text
    assert "# HELP isthmus_job_lease_takeovers_total" in text


def wait_for_text(scrape, needle: str, timeout: float = 20.0) -> str:
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            text = scrape()
        except OSError:  # not listening yet
            text = ""
        if needle in text:
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"{needle!r} not in /metrics:\n{text}")
        time.sleep(0.1)
