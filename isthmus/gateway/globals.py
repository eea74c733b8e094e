"""Global objects (flavors, keypairs, quotas, volume types): written to the master
region through the gateway, then propagated to every region by job handlers."""

from __future__ import annotations


def install(gateway, conf, engine, session) -> None:
    """Wire write hooks into the gateway (propagation jobs)."""
