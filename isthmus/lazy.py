"""One value per process, built on first use.

What a service builds from its configuration but must not build at import or
start: the database or Keystone may not be up yet, and a service that waits for
them at start does not start. The first caller builds it (under a lock, so two
threads never build two); every later caller gets the same one. A build that
raises builds nothing: the next caller tries again."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    def __init__(self) -> None:
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self, build: Callable[[], T]) -> T:
        """The value, made by ``build()`` if this is the first call to succeed."""
        with self._lock:
            if self._value is None:
                self._value = build()
            return self._value
