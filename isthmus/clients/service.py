"""What every per-region REST client shares: errors that keep "could not tell"
apart from an answer, a bounded timeout on every attempt, a circuit breaker per
service, and the caller's :mod:`isthmus.callguard` run before each request (the
job runner's: stop once the job must stop)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import requests
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc

from isthmus import callguard
from isthmus.breaker import Breaker

DEFAULT_TIMEOUT = 10.0

# An API object or request body, as JSON.
Body = dict[str, Any]


class Unavailable(Exception):
    """The region's service did not answer usefully (down, 5xx, no endpoint)."""


class Rejected(Exception):
    """A 4xx other than 404: the request itself was refused."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ServiceClient:
    """``timeout`` bounds each HTTP attempt (keystoneauth's own default is none:
    a service that accepts connections and never answers would hang the caller)."""

    service = "service"  # in messages: "RegionOne <service> unreachable"
    prefix = "/"  # prepended to every path

    def __init__(self, http: ks_adapter.Adapter, region: str, timeout: float = DEFAULT_TIMEOUT,
                 breaker: Breaker | None = None) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        self.http = http
        self.region = region
        self.timeout = timeout
        self.breaker = breaker or Breaker()

    def _send(self, method: str, path: str, body: Body | None = None, params: dict[str, Any] | None = None,
              headers: dict[str, str] | None = None) -> requests.Response:
        callguard.check()  # e.g. a job whose lease was lost stops here, before touching a region
        wait = self.breaker.admit()
        if wait:
            raise Unavailable(f"{self.region} {self.service} unreachable moments ago; "
                              f"not tried for another {wait:.0f}s")
        started = self.breaker.now()
        try:
            resp = self.http.request(f"{self.prefix}{path}", method, json=body, params=params, raise_exc=False,
                                     timeout=self.timeout, headers=headers)
        except ks_exc.ClientException as err:  # refused, timeout, endpoint not in catalogue
            # One slow call while others were answered is a busy service, not a
            # sick one: it must not fail every caller for a cooldown.
            self.breaker.failed(since=started)
            raise Unavailable(f"{self.region} {self.service} unreachable: {err}") from err
        except BaseException:
            self.breaker.abandoned()
            raise
        self.breaker.succeeded()
        return resp


def member_path(collection: str, obj_id: Any) -> str | None:
    """``collection/<id>`` with the id percent-encoded whole (an id holding ``?``
    or ``#`` must not name another URL); None for an id no object can have and a
    URL cannot carry: "", "." and ".." resolve to the collection or above it, and
    a server decodes ``%2F`` back into a path separator."""
    text = str(obj_id) if obj_id is not None else ""
    if text in ("", ".", "..") or "/" in text:
        return None
    return f"{collection}/{quote(text.encode('utf-8', 'surrogatepass'), safe='')}"
