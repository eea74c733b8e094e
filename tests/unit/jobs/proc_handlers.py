"""Handlers that worker *processes* load in test_processes.py ([jobs] handler_modules).

They report through files in $ISTHMUS_JOBS_TEST_DIR: appends of short lines
are atomic across processes, and flock tells whether two runs of one key
ever overlap, whichever process they are in.
"""

from __future__ import annotations

import fcntl
import os
import time
from functools import partial
from pathlib import Path

from isthmus.jobs import HandlerRegistry, JobContext

WAIT = 30.0


def register_handlers(registry: HandlerRegistry) -> None:
    workdir = Path(os.environ["ISTHMUS_JOBS_TEST_DIR"])
    registry.register("guarded", partial(guarded, workdir))
    registry.register("crashy", partial(crashy, workdir))
    registry.register("polite", partial(polite, workdir))
    registry.register("stubborn", partial(stubborn, workdir))


def append(path: Path, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def guarded(workdir: Path, ctx: JobContext) -> None:
    """Holds a per-key exclusive lock while it runs; failing to get it is a violation."""
    with open(workdir / f"lock-{ctx.resource_id}", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            append(workdir / "violations", ctx.resource_id)
            return
        try:
            append(workdir / "runs", f"{ctx.resource_id} {ctx.payload['seq']} {os.getpid()}")
            _wait_for(workdir / "go")  # the test opens the gate once runs overlap in time
            time.sleep(0.005)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def crashy(workdir: Path, ctx: JobContext) -> None:
    """Creates its resource idempotently; the first attempt then hangs until killed."""
    append(workdir / "runs", f"{ctx.resource_id} {ctx.attempt} {os.getpid()}")
    resource = workdir / f"resource-{ctx.resource_id}"
    if not resource.exists():  # level-triggered: create only what is missing
        resource.write_text(ctx.job_id)
        append(workdir / "creations", ctx.resource_id)
    if ctx.attempt == 1:
        append(workdir / "started", str(os.getpid()))
        time.sleep(120)  # SIGKILL lands here


def polite(workdir: Path, ctx: JobContext) -> None:
    append(workdir / "started", str(os.getpid()))
    deadline = time.monotonic() + WAIT
    while not ctx.should_stop() and time.monotonic() < deadline:
        time.sleep(0.01)
    append(workdir / "finished", ctx.resource_id)


def stubborn(workdir: Path, ctx: JobContext) -> None:
    append(workdir / "started", str(os.getpid()))
    time.sleep(120)  # ignores should_stop()


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + WAIT
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
