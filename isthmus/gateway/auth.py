"""Token validation through keystonemiddleware's auth_token (in a worker thread).

auth_token is WSGI middleware; we call it with a minimal environ and a capture app,
and read the identity headers it sets. Its token cache makes repeats cheap.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from isthmus.gateway.pools import BoundedPool


@dataclass(frozen=True)
class Identity:
    token: str
    user_id: str
    project_id: str
    roles: frozenset[str]

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


class Unauthorized(Exception):
    def __init__(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        super().__init__(f"{status}")
        self.status = status
        self.body = body
        self.headers = headers


class KeystoneValidator:
    def __init__(self, conf) -> None:
        from isthmus.clients.authtoken import auth_token_middleware

        self._middleware = auth_token_middleware(_capture, conf)
        self._pool = BoundedPool(16, "gateway-token")  # never starved by slow work (pools.py)

    def validate_sync(self, headers: Mapping[str, str]) -> Identity:
        environ: dict[str, Any] = {
            "REQUEST_METHOD": "GET", "PATH_INFO": "/", "SCRIPT_NAME": "", "QUERY_STRING": "",
            "SERVER_NAME": "isthmus-gateway", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(b""), "wsgi.errors": io.StringIO(),
            "wsgi.version": (1, 0), "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
        }
        for name in ("X-Auth-Token", "X-Service-Token"):
            value = _get(headers, name)
            if value:
                environ["HTTP_" + name.upper().replace("-", "_")] = value
        result: dict = {}

        def start_response(status, response_headers, exc_info=None):
            result["status"] = int(status.split()[0])
            result["headers"] = response_headers

        body = b"".join(self._middleware(environ, start_response))
        if result.get("status") != 200 or environ.get("HTTP_X_IDENTITY_STATUS") != "Confirmed":
            status = result.get("status", 401)
            return_status = status if status >= 400 else 401
            raise Unauthorized(return_status, body, [(k, v) for k, v in result.get("headers", [])
                                                     if k.lower() in ("www-authenticate", "content-type")])
        roles = frozenset(r.strip() for r in environ.get("HTTP_X_ROLES", "").split(",") if r.strip())
        return Identity(environ["HTTP_X_AUTH_TOKEN"], environ.get("HTTP_X_USER_ID", ""),
                        environ.get("HTTP_X_PROJECT_ID", ""), roles)

    async def validate(self, headers: Mapping[str, str]) -> Identity:
        return await self._pool.run(self.validate_sync, headers)


def _capture(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b""]


def _get(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None
