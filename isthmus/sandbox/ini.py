"""Write oslo.config INI files from nested dicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

Sections = Mapping[str, Mapping[str, Any]]


def render(sections: Sections) -> str:
    out: list[str] = []
    for section, options in sections.items():
        out.append(f"[{section}]")
        for key, value in options.items():
            if value is None:
                continue
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, (list, tuple)):
                value = ",".join(str(v) for v in value)
            out.append(f"{key} = {value}")
        out.append("")
    return "\n".join(out)


def write(path: Path, sections: Sections) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(sections))
    return path


def _password_auth(auth_url: str, user: str, password: str, region: str) -> dict[str, Any]:
    """keystoneauth password options of a service user in the ``service`` project."""
    return {
        "auth_url": auth_url,
        "auth_type": "password",
        "username": user,
        "password": password,
        "project_name": "service",
        "user_domain_name": "Default",
        "project_domain_name": "Default",
        # Without it a client may pick another region's endpoint (identity included).
        "region_name": region,
    }


def keystone_authtoken(auth_url: str, user: str, password: str, region: str) -> dict[str, Any]:
    """The ``[keystone_authtoken]`` section every API service carries."""
    return {"www_authenticate_uri": auth_url, **_password_auth(auth_url, user, password, region),
            "service_token_roles_required": True}


def service_client(auth_url: str, user: str, password: str, region: str) -> dict[str, Any]:
    """A client section (``[neutron]``, ``[placement]``, ...) that calls another service."""
    return {**_password_auth(auth_url, user, password, region), "valid_interfaces": "internal,public"}
