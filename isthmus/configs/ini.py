"""oslo.config INI text from nested dicts, and the sections every service shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from isthmus.clients.authtoken import KEYSTONE_TIMEOUT
from isthmus.db.engine import timeout_args

Sections = Mapping[str, Mapping[str, Any]]
# What the renderers build and the sandbox overlays its tuning onto.
MutableSections = dict[str, dict[str, Any]]


def render(sections: Sections) -> str:
    """INI text; ``None`` values are left out, booleans are oslo's true/false.

    oslo.config reads ``$name`` in a value as a reference to another option, so a
    literal ``$`` (a password's) is written ``$$``; nothing Isthmus renders relies
    on the substitution."""
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
            out.append(f"{key} = {str(value).replace('$', '$$')}")
        out.append("")
    return "\n".join(out)


def prune(sections: Sections) -> MutableSections:
    """Drop sections whose every value is None (an operator leaves the product
    defaults alone where the sandbox sets tuning values)."""
    return {name: dict(options) for name, options in sections.items()
            if any(value is not None for value in options.values())}


def overlay(base: Sections, extra: Sections) -> MutableSections:
    """``base`` with ``extra``'s options added or replaced, section by section
    (a deployment's tuning on top of the shared sections)."""
    out = {name: dict(options) for name, options in base.items()}
    for name, options in extra.items():
        out.setdefault(name, {}).update(options)
    return out


# Isthmus' one service user: the job worker, the Admin API, the gateway and the
# local plugins all act as it. The local plugin keeps this user's port deletes in
# the region (the worker deletes copies, never users' ports), so they must agree.
ISTHMUS_USER = "isthmus"


@dataclass(frozen=True)
class ServiceUser:
    """A Keystone service user in the ``service`` project.

    ``auth_url`` is what the service calls (Keystone's internal URL in a cluster);
    ``public_auth_url`` is what it tells clients (``www_authenticate_uri``),
    the same URL unless given."""

    auth_url: str
    username: str
    password: str
    region: str
    public_auth_url: str | None = None
    cafile: str | None = None  # the CA bundle its https calls trust; None: the system's

    def in_region(self, region: str) -> ServiceUser:
        return ServiceUser(self.auth_url, self.username, self.password, region, self.public_auth_url, self.cafile)


def password_auth(user: ServiceUser) -> dict[str, Any]:
    """keystoneauth password options of a service user in the ``service`` project."""
    return {
        "auth_url": user.auth_url,
        "auth_type": "password",
        "username": user.username,
        "password": user.password,
        "project_name": "service",
        "user_domain_name": "Default",
        "project_domain_name": "Default",
        # Without it a client may pick another region's endpoint (identity included).
        "region_name": user.region,
        "cafile": user.cafile,
    }


def keystone_authtoken(user: ServiceUser) -> dict[str, Any]:
    """The ``[keystone_authtoken]`` section every API service carries."""
    return {"www_authenticate_uri": user.public_auth_url or user.auth_url, **password_auth(user),
            "service_token_roles_required": True,
            # keystonemiddleware waits on Keystone for ever by default.
            "http_connect_timeout": KEYSTONE_TIMEOUT}


def service_client(user: ServiceUser) -> dict[str, Any]:
    """A client section (``[neutron]``, ``[placement]``, ...) that calls another service."""
    return {**password_auth(user), "valid_interfaces": "internal,public"}


def database(connection: str) -> dict[str, Any]:
    """A ``[database]`` section (oslo.db): for a MySQL/MariaDB or PostgreSQL server,
    the driver timeouts Isthmus' own engines use (a black-holed server must cost a
    bounded wait); ``connection_parameters`` joins them to the URL's query."""
    section: dict[str, Any] = {"connection": connection}
    url = sa.engine.make_url(connection)
    bounds = timeout_args(url)
    if bounds:
        section["connection_parameters"] = "&".join(f"{k}={v}" for k, v in bounds.items())
    return section
