"""The loop every CCM controller runs: work only while this replica holds the
Lease, and start each term from scratch."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


def work_while_leading(
    stop: threading.Event,
    is_leader: Callable[[], bool],
    started_leading: Callable[[], None],
    step: Callable[[], object],
    *,
    tick: float,
    log: logging.Logger,
    what: str,
    beat: Callable[[], None] | None = None,
) -> None:
    """Call ``step`` until ``stop`` while ``is_leader()``, idling a ``tick`` at a time
    otherwise. ``started_leading`` runs at the start of each term: a new leader
    trusts nothing the old one did. ``beat`` runs every round, led or not (liveness).
    A failing step is logged as ``what`` and retried a tick later: the thread is
    all the controller has."""
    leading = False
    while not stop.is_set():
        if beat is not None:
            beat()
        if not is_leader():
            leading = False
            stop.wait(tick)
            continue
        if not leading:
            leading = True
            started_leading()
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - the next tick retries
            log.warning("%s failed: %s", what, exc)
            stop.wait(tick)
