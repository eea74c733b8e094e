"""``clouds.yaml`` for the sandbox: clouds ``isthmus-admin`` and ``isthmus-demo``."""

from __future__ import annotations

import yaml

from isthmus.sandbox.layout import CENTRAL_REGION, PASSWORD, Layout


def _cloud(layout: Layout, user: str, project: str) -> dict:
    return {
        "auth": {
            "auth_url": layout.auth_url,
            "username": user,
            "password": PASSWORD,
            "project_name": project,
            "user_domain_name": "Default",
            "project_domain_name": "Default",
        },
        # The first is the default; the others are valid --os-region-name values.
        "regions": [*layout.regions, CENTRAL_REGION],
        "identity_api_version": 3,
        "interface": "public",
        # --tls: the gateway's and the Admin API's certificates are verified against it.
        **({"cacert": layout.ca_file} if layout.ca_file else {}),
    }


def write(layout: Layout) -> None:
    data = {"clouds": {
        "isthmus-admin": _cloud(layout, "admin", "admin"),
        "isthmus-demo": _cloud(layout, "demo", "demo"),
    }}
    layout.clouds_yaml.write_text(yaml.safe_dump(data, sort_keys=False))
