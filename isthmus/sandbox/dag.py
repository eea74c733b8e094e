"""Run setup steps concurrently as their dependencies finish, with progress lines."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[], object]
    after: tuple[str, ...] = ()
    what: str = ""  # shown while it runs, e.g. "schema + bootstrap"


class Progress:
    """One line per event, prefixed with seconds since start (safe across threads)."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._lock:
            print(f"[{time.monotonic() - self.started:6.1f}s] {text}", file=self.out, flush=True)


def run_steps(steps: list[Step], progress: Progress, workers: int | None = None) -> None:
    """Run every step after its dependencies; on the first failure, wait for the
    running steps, start no new ones, and re-raise that failure.

    By default every step that can run does (one thread each): most steps wait on
    a process or a port, and a step queued behind others' waits delays everything
    after it."""
    by_name = {s.name: s for s in steps}
    for step in steps:
        missing = [d for d in step.after if d not in by_name]
        if missing:
            raise ValueError(f"step {step.name} depends on unknown steps {missing}")
    done: set[str] = set()
    running: dict[Future, tuple[Step, float]] = {}
    pending = list(steps)
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=workers or max(1, len(steps))) as pool:
        while (pending and failure is None) or running:
            if failure is None:
                for step in [s for s in pending if all(d in done for d in s.after)]:
                    pending.remove(step)
                    progress.say(f"{step.name}: {step.what or 'starting'}")
                    running[pool.submit(step.run)] = (step, time.monotonic())
            if not running:
                if pending:
                    raise ValueError(f"steps can never run (dependency cycle): {[s.name for s in pending]}")
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                step, began = running.pop(future)
                err = future.exception()
                if err is None:
                    done.add(step.name)
                    progress.say(f"{step.name}: ready ({time.monotonic() - began:.1f}s)")
                elif failure is None:
                    failure = err
                    progress.say(f"{step.name}: FAILED")
    if failure is not None:
        raise failure
