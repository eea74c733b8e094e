"""Shared helpers for starting the OpenStack services of a sandbox."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from isthmus import polling
from isthmus.configs.services import TLSFiles
from isthmus.sandbox import process
from isthmus.sandbox.layout import Layout

BIN = Path(sys.executable).parent
# Data files (paste configs) that the service wheels install under the venv.
VENV_ETC = Path(sys.prefix) / "etc"


def tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        raise process.SandboxError(f"{name} is not installed in {BIN}; run the README's setup command")
    return str(path)


def start_wsgi(
    layout: Layout,
    name: str,
    factory: str,
    port: int,
    env: Mapping[str, str],
    threads: int = 8,
    health_path: str = "/",
    tls: TLSFiles | None = None,
) -> process.ServiceRecord:
    """Serve one OpenStack WSGI app with gunicorn (one worker process, threads);
    https with ``tls``."""
    log = layout.logs / f"{name}.log"
    argv = [
        sys.executable, "-m", "gunicorn",
        "--no-control-socket",  # gunicorn 27 shares one control socket per user otherwise
        "--bind", f"127.0.0.1:{port}",
        "--workers", "1",
        "--worker-class", "gthread",
        "--threads", str(threads),
        "--timeout", "300",
        "--graceful-timeout", "5",
        # Longer than any client's polling interval: with gunicorn's default (2 s), a
        # client polling every 2 s reuses a connection the server is just closing.
        "--keep-alive", "75",
        "--name", f"isthmus-{name}",
        "--error-logfile", "-",
        "--access-logfile", "-",  # one line per request: what operators grep first
        *(["--certfile", tls.cert_file, "--keyfile", tls.key_file] if tls else []),
        f"{factory}()" if ":" in factory else f"isthmus.sandbox.wsgi:{factory}()",
    ]
    scheme = "https" if tls else "http"
    return process.start(
        name, argv, log=log, run_dir=layout.run, env=env,
        port=port, url=f"{scheme}://127.0.0.1:{port}{health_path}", ready_line=gunicorn_ready_line(port, scheme),
        ca=layout.ca_file if tls else None,
    )


def gunicorn_ready_line(port: int, scheme: str = "http") -> str:
    return f"Listening at: {scheme}://127.0.0.1:{port}"


def start_daemon(layout: Layout, name: str, argv: list[str],
                 env: Mapping[str, str] | None = None) -> process.ServiceRecord:
    return process.start(name, argv, log=layout.logs / f"{name}.log", run_dir=layout.run, env=env)


def wait_http(record: process.ServiceRecord, timeout: float = 600) -> float:
    """Until the URL answers *and* (for gunicorn) our process says it listens on the
    port: another process on a port we lost a race for must not pass for ours."""
    url = record.url
    assert url

    def ready() -> bool:
        own = record.ready_line is None or process.logged_since_start(record, record.ready_line)
        return own and process.http_ok(url, ca=record.ca)

    return process.wait_until(ready, f"waiting for {url}", timeout, record)


def retry(fn, what: str, timeout: float = 60, interval: float = 1.0):
    """Call ``fn`` until it stops raising (services that answer before they are ready)."""
    try:
        return polling.retry(fn, timeout, what, interval)
    except TimeoutError as err:
        raise process.SandboxError(str(err)) from err.__cause__
