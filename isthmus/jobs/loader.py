"""Find handlers: ``isthmus.jobs.handlers`` entry points and configured modules.

Either way the engine calls ``register(registry)`` and never names a type. A
hook that takes a second argument also gets the worker's configuration (its
handlers read their own options and credentials from it).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from typing import Any

from isthmus.jobs.registry import HandlerRegistry

ENTRY_POINT_GROUP = "isthmus.jobs.handlers"
MODULE_HOOK = "register_handlers"


def load_handlers(
    registry: HandlerRegistry, modules: Iterable[str] = (), *, use_entry_points: bool = True, conf: Any = None
) -> HandlerRegistry:
    if use_entry_points:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            _call(ep.load(), registry, conf)
    for name in modules:
        module = importlib.import_module(name)
        hook = getattr(module, MODULE_HOOK, None)
        if not callable(hook):
            raise ValueError(f"handler module {name} has no {MODULE_HOOK}(registry) function")
        _call(hook, registry, conf)
    return registry


def _call(hook: Callable[..., Any], registry: HandlerRegistry, conf: Any) -> None:
    if len(inspect.signature(hook).parameters) >= 2:
        hook(registry, conf)
    else:
        hook(registry)
