"""Write oslo.config INI files from nested dicts (rendering: isthmus.configs.ini)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from isthmus.configs import ini as _render
from isthmus.configs.ini import Sections, ServiceUser, render

__all__ = ["Sections", "ServiceUser", "render", "write", "keystone_authtoken", "service_client"]


def write(path: Path, sections: Sections) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(sections))
    return path


def keystone_authtoken(auth_url: str, user: str, password: str, region: str) -> dict[str, Any]:
    """The ``[keystone_authtoken]`` section every API service carries."""
    return _render.keystone_authtoken(ServiceUser(auth_url, user, password, region))


def service_client(auth_url: str, user: str, password: str, region: str) -> dict[str, Any]:
    """A client section (``[neutron]``, ``[placement]``, ...) that calls another service."""
    return _render.service_client(ServiceUser(auth_url, user, password, region))
