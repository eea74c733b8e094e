"""The rest of the compute/volume surface, each concern in its own module, wired
into the Gateway through its extension points (local handlers, create rewriters)."""

from __future__ import annotations


def install(gateway) -> None:
    from isthmus.gateway import aggregates, attachments, server_groups

    server_groups.install(gateway)
    attachments.install(gateway)
    aggregates.install(gateway)
