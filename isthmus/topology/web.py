"""``isthmus topology serve``: the topology model as a local web page.

Server-rendered HTML (Jinja2 templates, CSS grid: regions are columns, each
central network a band across them) and a few lines of script: every
``interval`` seconds the page fetches ``/fragment`` and swaps it in, and a
click on any box shows the JSON behind it. No front-end build, no layout code
of our own. ``/model.json`` serves the whole model.

The model is refreshed by one background thread, never by a request: a page
load costs nothing, and a hung region (bounded by the collector's timeout)
delays the next picture, never the page. Bound to 127.0.0.1 by default: it
shows what the user's credentials can see, like ``kubectl proxy``.

Who can see it (``Access``): a request must name an allowed ``Host`` (localhost,
the bind address, ``--allow-host``): a web site the user visits cannot read the
page by pointing its own name at 127.0.0.1 (DNS rebinding). With a token
(``--token``), a request must also carry it (``Authorization: Bearer``, or
``?token=`` once, which sets a same-site cookie for the page's own fetches).
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs
from wsgiref import simple_server

from isthmus.topology.model import Topology

if TYPE_CHECKING:
    import jinja2

LOG = logging.getLogger(__name__)

DEFAULT_PORT = 8390
DEFAULT_INTERVAL = 5.0

StartResponse = Callable[..., Any]
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
TOKEN_COOKIE = "isthmus_topology_token"
WILDCARD_BINDS = ("", "0.0.0.0", "::")


@dataclass(frozen=True)
class Access:
    """Which ``Host`` names the page answers to, and the token it wants (if any)."""

    hosts: frozenset[str] = LOCAL_HOSTS
    token: str | None = None

    @classmethod
    def for_bind(cls, bind: str, extra_hosts: Iterable[str] = (), token: str | None = None) -> Access:
        own = set() if bind in WILDCARD_BINDS else {bind.strip("[]")}
        return cls(LOCAL_HOSTS | own | {h.lower() for h in extra_hosts}, token or None)

    def refusal(self, environ: dict[str, Any]) -> tuple[str, str] | None:
        """(status, reason) when the request may not see the page; None when it may."""
        host = _host_name(environ.get("HTTP_HOST") or environ.get("SERVER_NAME") or "")
        if host not in self.hosts:
            return "403 Forbidden", f"Host {host!r} is not allowed here (see --allow-host)\n"
        if self.token and not any(hmac.compare_digest(self.token, given) for given in _tokens(environ)):
            return "401 Unauthorized", "a token is needed (Authorization: Bearer, or ?token=)\n"
        return None


def _host_name(header: str) -> str:
    """``Host`` without its port, lower case; ``[::1]:8390`` -> ``::1``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _tokens(environ: dict[str, Any]) -> list[str]:
    found = []
    auth = environ.get("HTTP_AUTHORIZATION") or ""
    if auth.lower().startswith("bearer "):
        found.append(auth[7:].strip())
    found += parse_qs(environ.get("QUERY_STRING") or "").get("token", [])
    for part in (environ.get("HTTP_COOKIE") or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == TOKEN_COOKIE:
            found.append(value)
    return found


@dataclass
class State:
    """The newest model and how it was obtained; shared by the refresher and the app."""

    topology: Topology | None = None
    error: str | None = None  # the last refresh failed as a whole (e.g. Keystone down)
    refreshed_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, topology: Topology | None, error: str | None) -> None:
        with self.lock:
            if topology is not None:
                self.topology = topology
            self.error = error
            self.refreshed_at = time.time()

    def get(self) -> tuple[Topology | None, str | None]:
        with self.lock:
            return self.topology, self.error


class Refresher(threading.Thread):
    """Collects a fresh model every ``interval`` seconds (after the previous one)."""

    def __init__(self, collect: Callable[[], Topology], state: State, interval: float) -> None:
        super().__init__(name="topology-refresh", daemon=True)
        self.collect = collect
        self.state = state
        self.interval = interval
        self.stopped = threading.Event()

    def refresh_once(self) -> None:
        try:
            self.state.set(self.collect(), None)
        except Exception as err:  # noqa: BLE001 - shown on the page; the last good model stays
            LOG.warning("topology refresh failed: %s", err)
            LOG.debug("%s", traceback.format_exc())
            self.state.set(None, f"{type(err).__name__}: {err}")

    def run(self) -> None:
        while not self.stopped.is_set():
            self.refresh_once()
            self.stopped.wait(self.interval)

    def stop(self) -> None:
        self.stopped.set()


def _environment() -> jinja2.Environment:
    import jinja2  # here: 'isthmus --help' imports this module's constants only

    env = jinja2.Environment(loader=jinja2.PackageLoader("isthmus.topology", "templates"),
                             autoescape=jinja2.select_autoescape(default=True), trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["as_json"] = _as_json
    return env


def _as_json(value: Any) -> str:
    """What a click shows: the box's part of the model, with the API answer behind it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(value, indent=2, default=str)


class TopologyApp:
    """The WSGI app: ``/`` the page, ``/fragment`` its refreshed part, ``/model.json``."""

    def __init__(self, state: State, interval: float, access: Access | None = None) -> None:
        self.state = state
        self.interval = interval
        self.access = access or Access()
        self.env = _environment()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        refused = self.access.refusal(environ)
        if refused is not None:
            return _answer(start_response, refused[0], "text/plain", refused[1].encode())
        if self.access.token and "token=" in (environ.get("QUERY_STRING") or ""):
            # The page's own fetches carry the token as a cookie from now on.
            start_response = _with_cookie(start_response, self.access.token)
        path = environ.get("PATH_INFO") or "/"
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return _answer(start_response, "405 Method Not Allowed", "text/plain", b"GET only\n",
                           [("Allow", "GET, HEAD")])
        if path == "/":
            return _answer(start_response, "200 OK", "text/html; charset=utf-8", self.render("page.html"))
        if path == "/fragment":
            return _answer(start_response, "200 OK", "text/html; charset=utf-8", self.render("fragment.html"))
        if path == "/model.json":
            topology, error = self.state.get()
            body = {"error": error, "topology": topology.to_dict() if topology else None}
            return _answer(start_response, "200 OK", "application/json", json.dumps(body, default=str).encode())
        return _answer(start_response, "404 Not Found", "text/plain", f"nothing at {path}\n".encode())

    def render(self, template: str) -> bytes:
        topology, error = self.state.get()
        return self.env.get_template(template).render(
            topology=topology, error=error, interval=self.interval,
            columns=len(topology.regions) if topology else 1).encode()


def _answer(start_response: StartResponse, status: str, content_type: str, body: bytes,
            headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body))),
                            ("Cache-Control", "no-store"), *(headers or [])])
    return [body]


def _with_cookie(start_response: StartResponse, token: str) -> StartResponse:
    cookie = f"{TOKEN_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"

    def wrapped(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
        return start_response(status, [*headers, ("Set-Cookie", cookie)], *exc_info)
    return wrapped


class _ThreadingServer(ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True  # a browser holding a connection never blocks the exit


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        LOG.debug("%s %s", self.address_string(), format % args)


def make_server(app: TopologyApp, bind: str, port: int) -> simple_server.WSGIServer:
    return simple_server.make_server(bind, port, app, server_class=_ThreadingServer, handler_class=_QuietHandler)


def serve(collect: Callable[[], Topology], bind: str, port: int, interval: float,
          ready: Callable[[str], None] = print, access: Access | None = None) -> None:
    """Serve until interrupted; ``ready`` gets the URL once listening."""
    state = State()
    access = access or Access.for_bind(bind)
    refresher = Refresher(collect, state, interval)
    server = make_server(TopologyApp(state, interval, access), bind, port)
    refresher.start()
    host = f"[{bind}]" if ":" in bind else bind
    query = "?token=" + access.token if access.token else ""
    ready(f"topology page on http://{host}:{server.server_port}/{query} (model: /model.json; "
          f"refresh {interval:g}s)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        refresher.stop()
        server.server_close()
