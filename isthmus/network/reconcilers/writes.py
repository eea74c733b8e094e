"""Conditional writes to a regional Neutron: change an object only as it was read.

A reconciler reads a region's copy, compares it with central and writes the
difference. Between the read and the write another run (a worker whose lease was
taken over, a user, Nova binding the port) may have changed it; an unconditional
write would then put back what it read. Neutron's ``If-Match:
revision_number=N`` makes the write conditional; a 412 is a retry (the next run
reads afresh), never a failure and never a stale overwrite.
"""

from __future__ import annotations

from isthmus.clients import NeutronClient, Rejected
from isthmus.jobs import RetryLater

PRECONDITION_FAILED = 412


def update_as_read(neutron: NeutronClient, collection: str, read: dict, changes: dict) -> None:
    """Write ``changes`` to the object ``read`` only if it is still at the revision read."""
    try:
        neutron.update(collection, read["id"], changes, if_revision=read.get("revision_number"))
    except Rejected as err:
        if err.status != PRECONDITION_FAILED:
            raise
        raise _changed(collection, read) from err


def delete_as_read(neutron: NeutronClient, collection: str, read: dict) -> bool:
    """Delete the object ``read`` only if it is still at the revision read (a copy
    planned stale that Nova has bound since is not pulled from under its server)."""
    try:
        return neutron.delete(collection, read["id"], if_revision=read.get("revision_number"))
    except Rejected as err:
        if err.status != PRECONDITION_FAILED:
            raise
        raise _changed(collection, read) from err


def _changed(collection: str, read: dict) -> RetryLater:
    return RetryLater(f"{collection} {read['id']} changed since it was read; reading it again")
