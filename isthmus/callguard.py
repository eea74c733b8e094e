"""A check that outbound clients run before every request.

The job runner installs one around a handler, so a handler whose lease was
lost or whose deadline passed stops at its next region call instead of working
beside the job's new owner. Clients only call :func:`check` and raise whatever
the guard raises; neither side imports the other.

The guard is a context variable: each handler thread sees its own. A thread a
handler starts sees it only if started in a copy of the handler's context
(``contextvars.copy_context().run``); executors do not copy it by themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Guard = Callable[[], None]

_guard: ContextVar[Guard | None] = ContextVar("isthmus_call_guard", default=None)


@contextmanager
def installed(guard: Guard) -> Iterator[None]:
    """Run the block with ``guard`` checked before each outbound call."""
    token = _guard.set(guard)
    try:
        yield
    finally:
        _guard.reset(token)


def check() -> None:
    """Raise what the installed guard raises; nothing when none is installed."""
    guard = _guard.get()
    if guard is not None:
        guard()
