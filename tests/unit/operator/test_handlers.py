"""The per-kind handler declarations of isthmus.operator.handlers against crds.KINDS and
controllers.DELETERS: written out kind by kind, they must not drift from either.

kopf keeps no public view of its registry; its handler lists are read through the
registry's private attributes (a kopf upgrade that moves them fails here, loudly)."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from isthmus.operator import GROUP, controllers
from isthmus.operator.crds import KINDS

# Imported through the kmock harness: it sets the operator's test settings, which the
# handlers module reads at import, before importing it.
from tests.unit.operator.kmock_harness import handlers

KIND_BY_PLURAL = {plural: kind for kind, (plural, _, _) in KINDS.items()}


def isthmus_handlers(handler_list: Any) -> dict[str, Any]:
    """Handler id -> handler, for the handlers of the Isthmus kinds in a kopf registry list."""
    return {h.id: h for h in handler_list.get_all_handlers() if h.selector.group == GROUP}


REGISTRY = kopf.get_default_registry()
EVENTS = isthmus_handlers(REGISTRY._watching)
TIMERS = isthmus_handlers(REGISTRY._spawning)
CLEANUPS = isthmus_handlers(REGISTRY._changing)


def test_every_kind_has_an_event_handler_and_a_resync_timer() -> None:
    assert {h.selector.any_name for h in EVENTS.values()} == {plural for plural, _, _ in KINDS.values()}
    assert set(EVENTS) == {f"event-{plural}" for plural, _, _ in KINDS.values()}
    assert set(TIMERS) == {f"resync-{plural}" for plural, _, _ in KINDS.values()}
    for timer in TIMERS.values():
        assert timer.selector.any_name == timer.id.removeprefix("resync-")
        assert (timer.interval, timer.idle) == (handlers.RESYNC_SECONDS, handlers.RESYNC_IDLE)


def test_exactly_the_kinds_with_a_deleter_have_a_cleanup_handler() -> None:
    assert all(h.reason == kopf.Reason.DELETE for h in CLEANUPS.values())
    assert {KIND_BY_PLURAL[h.selector.any_name] for h in CLEANUPS.values()} == set(controllers.DELETERS)
    assert set(CLEANUPS) == {f"cleanup-{KINDS[kind][0]}" for kind in controllers.DELETERS}


class RecordingQueue:
    """Stands for the work queue: records the keys the handlers enqueue."""

    def __init__(self) -> None:
        self.keys: list[tuple[str, str, str]] = []
        self.kube = None

    def add(self, key: tuple[str, str, str]) -> None:
        self.keys.append(key)


def memo_with_queue() -> tuple[kopf.Memo, RecordingQueue]:
    queue = RecordingQueue()
    return kopf.Memo(state=handlers.OperatorState(queue=queue)), queue  # type: ignore[arg-type]


@pytest.mark.asyncio
@pytest.mark.parametrize("plural", sorted(KIND_BY_PLURAL))
async def test_each_handler_passes_the_kind_it_is_declared_for(plural: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block copied from another kind and not fully edited would enqueue the wrong kind."""
    kind = KIND_BY_PLURAL[plural]
    memo, queue = memo_with_queue()
    await TIMERS[f"resync-{plural}"].fn(namespace="ns1", name="x", memo=memo)
    body: Any = {"metadata": {"name": "y", "namespace": "ns1", "generation": 1}}  # kopf's Body reads the same
    await EVENTS[f"event-{plural}"].fn(event={"type": "ADDED", "object": {}}, body=body, namespace="ns1", name="y",
                                       memo=memo)
    assert queue.keys == [(kind, "ns1", "x"), (kind, "ns1", "y")]

    if kind in controllers.DELETERS:
        deleted: list[str] = []

        async def deleter(kube: Any, obj: dict[str, Any]) -> bool:
            deleted.append(obj["kind"])
            return True

        monkeypatch.setitem(controllers.DELETERS, kind, deleter)
        await CLEANUPS[f"cleanup-{plural}"].fn(body=body, memo=memo)
        assert deleted == [kind]
