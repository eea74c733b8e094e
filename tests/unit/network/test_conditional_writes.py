"""Reconcilers change a regional object only as they read it."""

from __future__ import annotations

from typing import Any, cast

import pytest

from isthmus.clients import Rejected
from isthmus.jobs import RetryLater
from isthmus.network.reconcilers.writes import delete_as_read, update_as_read


class Neutron:
    def __init__(self, revision: int) -> None:
        self.revision = revision
        self.writes: list[tuple[str, str, dict, int | None]] = []

    def update(self, collection: str, obj_id: str, changes: dict, if_revision: int | None = None) -> dict:
        if if_revision is not None and if_revision != self.revision:
            raise Rejected(412, "Constraint revision_number does not match")
        self.writes.append((collection, obj_id, changes, if_revision))
        self.revision += 1
        return {"id": obj_id, **changes}

    def delete(self, collection: str, obj_id: str, if_revision: int | None = None) -> bool:
        if if_revision is not None and if_revision != self.revision:
            raise Rejected(412, "Constraint revision_number does not match")
        self.writes.append((collection, obj_id, {}, if_revision))
        return True


def test_a_write_carries_the_revision_it_was_read_at():
    neutron = Neutron(revision=7)
    update_as_read(cast(Any, neutron), "ports", {"id": "p1", "revision_number": 7}, {"name": "x"})
    assert neutron.writes == [("ports", "p1", {"name": "x"}, 7)]


def test_an_object_changed_since_the_read_is_a_retry_never_a_stale_overwrite():
    """A worker whose lease was taken over read revision 7; the object is at 8 now."""
    neutron = Neutron(revision=8)
    with pytest.raises(RetryLater, match="changed since it was read"):
        update_as_read(cast(Any, neutron), "networks", {"id": "n1", "revision_number": 7}, {"mtu": 1400})
    assert neutron.writes == []


def test_other_refusals_are_not_hidden():
    class Refusing(Neutron):
        def update(self, *args: Any, **kwargs: Any) -> dict:
            raise Rejected(400, "bad field")

    with pytest.raises(Rejected):
        update_as_read(cast(Any, Refusing(1)), "subnets", {"id": "s1", "revision_number": 1}, {"name": "y"})


def test_a_delete_carries_the_revision_it_was_read_at():
    neutron = Neutron(revision=3)
    assert delete_as_read(cast(Any, neutron), "ports", {"id": "p1", "revision_number": 3})
    assert neutron.writes == [("ports", "p1", {}, 3)]


def test_a_copy_bound_since_it_was_planned_stale_is_not_deleted():
    """Planned stale at revision 3; Nova bound it (revision 4) before the delete."""
    neutron = Neutron(revision=4)
    with pytest.raises(RetryLater, match="changed since it was read"):
        delete_as_read(cast(Any, neutron), "ports", {"id": "p1", "revision_number": 3})
    assert neutron.writes == []
