"""The rest of the compute/volume surface, each concern in its own module, wired
into the Gateway through its extension points (local handlers, create rewriters)."""

from __future__ import annotations


def install(gateway, engine) -> None:
    """After globals.install (quota_sets wraps its os-quota-sets handler)."""
    from isthmus.gateway import aggregates, attachments, quota_sets, server_groups

    server_groups.install(gateway)
    attachments.install(gateway)
    aggregates.install(gateway)
    quota_sets.install(gateway, engine)
