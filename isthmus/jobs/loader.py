"""Find handlers: ``isthmus.jobs.handlers`` entry points and configured modules.

Either way the engine calls ``register(registry)`` and never names a type.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.metadata import entry_points

from isthmus.jobs.registry import HandlerRegistry

ENTRY_POINT_GROUP = "isthmus.jobs.handlers"
MODULE_HOOK = "register_handlers"


def load_handlers(
    registry: HandlerRegistry, modules: Iterable[str] = (), *, use_entry_points: bool = True
) -> HandlerRegistry:
    if use_entry_points:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            ep.load()(registry)
    for name in modules:
        module = importlib.import_module(name)
        hook = getattr(module, MODULE_HOOK, None)
        if not callable(hook):
            raise ValueError(f"handler module {name} has no {MODULE_HOOK}(registry) function")
        hook(registry)
    return registry
