"""What a region tells central about its ports: bindings, and deletes made
while central was down. Level-triggered, retried, ordered.

* Level-triggered: a send reads the port's *current* state here, never the
  event's, so a retry that comes late reports what is true now.
* Ordered: central's port is read first and written only if unchanged since
  (``If-Match`` on its revision). A region never unbinds a port central says
  lives in another region: a late unbind from the old region cannot overwrite
  the bind the new region reported.
* Retried: a send that fails (central down, a concurrent change) is kept and
  tried again with backoff by one background thread, until central has it.
* Durable, for deletes: a delete central could not be told of is in the
  :mod:`journal` before the regional delete, and each pass picks up what the
  journal holds, so a restart of this neutron-server loses none (nothing else
  can prove the delete: an absent port is no proof). A binding lost in a
  restart, the worker's periodic ``binding_sync`` repairs from the regions'
  own state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from isthmus.network import bound_region, report_differs
from isthmus.network.local.central import CentralClient, CentralRejected, CentralUnavailable
from isthmus.network.local.journal import DeleteJournal

LOG = logging.getLogger(__name__)

Report = dict  # {binding:host_id, device_owner, device_id, binding:profile}


@dataclass(frozen=True)
class Outcome:
    done: bool
    why: str = ""


@dataclass
class _Pending:
    kind: str  # "report" or "delete"
    attempts: int = 0
    due: float = field(default_factory=time.monotonic)


class CentralReports:
    """``read_report(port_id)``: the report of the port as it is here now (None:
    no such port here); ``client()``: central's REST client; ``journal``: where
    deletes wait durably (None: in memory only)."""

    def __init__(self, region: str, read_report: Callable[[str], Report | None],
                 client: Callable[[], CentralClient], *, journal: DeleteJournal | None = None,
                 max_delay: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 background: bool = True) -> None:
        self.region = region
        self.journal = journal
        self.read_report = read_report
        self.client = client
        self.max_delay = max_delay
        self.clock = clock
        self.background = background  # False: the caller drives retry_due (tests)
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- callers
    def report(self, port_id: str) -> None:
        """Tell central where the port is bound now; retried in the background
        until central has it. Tried at once first: when Nova's unbind returns,
        central must know the port is free (a user reuses it in another region
        right away, and central refuses to delete a port it thinks is bound)."""
        outcome = self.send(port_id, "report")
        if outcome.done:
            with self._lock:
                self._pending.pop(port_id, None)
            return
        LOG.warning("isthmus: report of port %s to central deferred: %s", port_id, outcome.why)
        self._queue(port_id, "report", due=self.clock() + self._delay(1))

    def will_delete(self, port_id: str) -> None:
        """Called before the regional delete of a port central cannot be told of
        now: the journal holds it from here on, whatever restarts."""
        if self.journal is not None:
            self.journal.record(port_id)

    def deleted_here(self, port_id: str) -> None:
        """The port was deleted here while central could not be told."""
        LOG.warning("isthmus: delete of port %s queued for central", port_id)
        self._queue(port_id, "delete", due=self.clock() + self._delay(1))

    def resume(self) -> None:
        """Keep the background thread running: each pass sends what the journal
        holds (left by an earlier run of this server, or by another API worker).
        Cheap; called from every port write, so a forked worker starts its own."""
        if self.journal is not None:
            self._ensure_thread()

    def pending(self) -> dict[str, str]:
        with self._lock:
            return {port_id: p.kind for port_id, p in self._pending.items()}

    # ---------------------------------------------------------------- sending
    def send(self, port_id: str, kind: str) -> Outcome:
        try:
            return self._send_report(port_id) if kind == "report" else self._send_delete(port_id)
        except CentralUnavailable as err:
            return Outcome(False, str(err))
        except CentralRejected as err:
            if err.status in (409, 412):  # changed concurrently: read again and retry
                return Outcome(False, str(err))
            LOG.error("isthmus: central refused the %s of port %s: %s", kind, port_id, err)
            return Outcome(True, str(err))  # retrying the same request cannot help

    def _send_report(self, port_id: str) -> Outcome:
        report = self.read_report(port_id)
        if report is None:
            return Outcome(True, "gone here")
        if report.get("binding:host_id"):
            # A bind is this region's present truth and always applies: one write,
            # no read first (it sits in the path of every boot).
            if self.client().update_port(port_id, report) is None:
                return Outcome(True, "central has no such port")
            LOG.info("isthmus: reported binding of port %s (host %r) to central", port_id,
                     report["binding:host_id"])
            return Outcome(True)
        central = self.client().port(port_id)
        if central is None:
            return Outcome(True, "central has no such port")
        owner = bound_region(central)
        if owner not in (None, self.region):
            return Outcome(True, f"stale unbind: central says it lives in {owner}")
        if not report_differs(central, report):
            return Outcome(True, "central has it")
        self.client().update_port(port_id, report, if_revision=central.get("revision_number"))
        LOG.info("isthmus: reported port %s unbound to central", port_id)
        return Outcome(True)

    def _send_delete(self, port_id: str) -> Outcome:
        central = self.client().port(port_id)
        if central is None:
            return Outcome(True, "central has no such port")
        if self.read_report(port_id) is not None:
            return Outcome(True, "exists here again")
        if bound_region(central) not in (None, self.region):
            return Outcome(True, f"lives in {bound_region(central)} now")
        self.client().delete_port(port_id)
        LOG.info("isthmus: deleted port %s at central (deleted here while central was unreachable)", port_id)
        return Outcome(True)

    # ---------------------------------------------------------------- retries
    def _queue(self, port_id: str, kind: str, due: float) -> None:
        with self._lock:
            self._pending[port_id] = _Pending(kind, 0, due)
        self._ensure_thread()
        self._wake.set()

    def retry_due(self) -> int:
        """One pass over the due sends; how many are still pending."""
        now = self.clock()
        with self._lock:
            for port_id in self.journal.pending() if self.journal is not None else ():
                if port_id not in self._pending:  # left by an earlier run, or by another API worker
                    self._pending[port_id] = _Pending("delete", 0, now)
            due = [(port_id, p) for port_id, p in self._pending.items() if p.due <= now]
        for port_id, item in due:
            # Central down: each send fails fast (the client's circuit breaker).
            outcome = self.send(port_id, item.kind)
            with self._lock:
                current = self._pending.get(port_id)
                if current is not item:
                    continue  # re-queued meanwhile: that one is newer
                if outcome.done:
                    del self._pending[port_id]
                    if item.kind == "delete" and self.journal is not None:
                        self.journal.forget(port_id)
                else:
                    item.attempts += 1
                    item.due = self.clock() + self._delay(item.attempts)
                    LOG.warning("isthmus: %s of port %s to central deferred (attempt %d): %s",
                                item.kind, port_id, item.attempts, outcome.why)
        with self._lock:
            return len(self._pending)

    def _delay(self, attempts: int) -> float:
        return min(self.max_delay, 0.5 * 2 ** attempts)

    def _ensure_thread(self) -> None:
        if not self.background:
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="isthmus-central-reports", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            try:
                self.retry_due()
            except Exception:  # noqa: BLE001 - the thread must outlive any one failure
                LOG.exception("isthmus: retrying reports to central")
