"""JSON error bodies, and the map from library errors to HTTP statuses.

Every error answer has the reference's form ``{"<type>": {"message": ..., "code": N}}``;
the message of a 4xx names the field (or query parameter) at fault.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import webob

from isthmus import jobs, registry

FAULT_TYPES = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    405: "badMethod",
    409: "conflictingRequest",
    413: "overLimit",
    500: "internalServerError",
}


class ApiError(Exception):
    """An error answer raised by a controller."""

    def __init__(self, status: int, message: str, headers: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = list(headers)


class BadRequest(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(400, message)


class NotFound(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(404, message)


class Forbidden(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(403, message)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a known library error, None for anything else (a 500)."""
    if isinstance(exc, ApiError):
        return exc.status
    if isinstance(exc, registry.RegistryError):
        return exc.status
    if isinstance(exc, jobs.JobNotFound):
        return 404
    # As Tricircle: deleting a RUNNING job and redoing a RUNNING/SUCCESS one are 400s.
    if isinstance(exc, (jobs.InvalidJobRequest, jobs.InvalidJobState, jobs.UnknownJobType)):
        return 400
    if isinstance(exc, jobs.ConcurrentUpdate):
        return 409  # lost to concurrent writers: the client may retry
    return None


def message_of(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return exc.message
    if isinstance(exc, jobs.UnknownJobType):
        return f"type: unknown job type {exc.args[0]!r}"
    return str(exc)


def response(status: int, message: str, headers: Iterable[tuple[str, str]] = ()) -> webob.Response:
    kind = FAULT_TYPES.get(status, "badRequest" if status < 500 else "internalServerError")
    body = json.dumps({kind: {"message": message, "code": status}})
    resp = webob.Response(body=body.encode(), status=status, content_type="application/json", charset="UTF-8")
    for name, value in headers:
        resp.headers[name] = value
    return resp
