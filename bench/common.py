"""Helpers the benchmark scripts share (run as ``python bench/X.py``: this
directory is on their import path)."""

from __future__ import annotations

from isthmus.sandbox.layout import PASSWORD, Layout


def connect(layout: Layout, region: str, user: str):
    """An openstacksdk connection as a sandbox user (``admin`` or ``demo``, each in its own project)."""
    import openstack

    return openstack.connect(auth_url=layout.auth_url, username=user, password=PASSWORD, project_name=user,
                             user_domain_name="Default", project_domain_name="Default", region_name=region)


def pct(values: list[float], q: float) -> float:
    """The q-quantile by nearest rank (NaN for no samples)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")
