"""Errors in the Nova/Cinder fault format: ``{"itemNotFound": {"message", "code"}}``."""

from __future__ import annotations

import json

from aiohttp import web

FAULT_NAMES = {
    400: "badRequest", 401: "unauthorized", 403: "forbidden", 404: "itemNotFound", 405: "badMethod",
    409: "conflictingRequest", 413: "overLimit", 415: "badMediaType", 429: "overLimit",
    501: "notImplemented", 503: "serviceUnavailable",
}


class Fault(Exception):
    """Raise anywhere in a handler; the app turns it into a fault response."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def body(status: int, message: str) -> dict:
    return {FAULT_NAMES.get(status, "computeFault"): {"message": message, "code": status}}


def response(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=json.dumps(body(status, message)).encode(),
                        content_type="application/json", headers=headers)


def integer_at_least(raw: str, minimum: int, not_integer: str, too_small: str) -> int:
    """A number from a URL or a query (``limit``, an aggregate id): the client's 400 otherwise."""
    try:
        value = int(raw)
    except ValueError:
        raise Fault(400, not_integer) from None
    if value < minimum:
        raise Fault(400, too_small)
    return value
