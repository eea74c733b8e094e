"""Start, watch and stop the sandbox's background processes, by pid.

Each service runs in its own session (process group), so stopping it also stops
the workers it forked (gunicorn workers, nova's children) and nothing is left
listening.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from isthmus.polling import poll


class SandboxError(RuntimeError):
    """A failure with one line that tells the user what broke and where to look."""


@dataclasses.dataclass
class ServiceRecord:
    """A started background process, as saved in ``run/<name>.json``."""

    name: str
    pid: int
    log: str
    port: int | None = None
    url: str | None = None  # health URL, if the service speaks HTTP
    log_offset: int = 0  # size of the log when this run started (logs are appended to)
    ready_line: str | None = None  # what this run logs once it listens (gunicorn's "Listening at: URL")
    ca: str | None = None  # the CA an https health URL is verified with (``--tls``)

    def save(self, run_dir: Path) -> None:
        (run_dir / f"{self.name}.json").write_text(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def load_all(cls, run_dir: Path) -> list[ServiceRecord]:
        if not run_dir.is_dir():
            return []
        records = [cls(**json.loads(p.read_text())) for p in run_dir.glob("*.json")]
        return sorted(records, key=lambda r: r.pid)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_is_listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still "exists"; reap it so it reads as dead.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def start(
    name: str,
    argv: Sequence[str],
    log: Path,
    run_dir: Path,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    url: str | None = None,
    cwd: Path | None = None,
    ready_line: str | None = None,
    ca: str | None = None,
) -> ServiceRecord:
    """Start ``argv`` detached from us, output appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    full_env.update(env or {})
    offset = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    record = ServiceRecord(name=name, pid=proc.pid, log=str(log), port=port, url=url, log_offset=offset,
                           ready_line=ready_line, ca=ca)
    record.save(run_dir)
    return record


def run(argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None, what: str = "") -> None:
    """Run a setup command to completion; on failure name it and its log."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        result = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=full_env)
    if result.returncode != 0:
        raise SandboxError(f"{what or argv[0]} failed (exit {result.returncode}); read {log}")


def http_ok(url: str, timeout: float = 2.0, ca: str | None = None) -> bool:
    """Any HTTP answer below 500 means the server is up (version documents are 300).
    An https URL is verified against ``ca`` (the sandbox's own CA), never unverified."""
    context = ssl.create_default_context(cafile=ca) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            return resp.status < 500
    except urllib.error.HTTPError as err:
        return err.code < 500
    except (OSError, ValueError):
        return False


def wait_until(
    check: Callable[[], bool],
    what: str,
    timeout: float,
    record: ServiceRecord | None = None,
    interval: float = 0.25,
) -> float:
    """Poll ``check`` until true; fail fast if the watched process died. Returns the seconds waited."""
    started = time.monotonic()

    def done() -> bool:
        if check():
            return True
        if record is not None and not pid_alive(record.pid):
            raise SandboxError(f"{record.name} exited while {what}; read {record.log}\n{tail(record.log)}")
        return False

    try:
        poll(done, timeout, what, interval)
    except TimeoutError:
        where = f"; read {record.log}" if record else ""
        raise SandboxError(f"timed out after {timeout:.0f}s {what}{where}") from None
    return time.monotonic() - started


def logged_since_start(record: ServiceRecord, text: str) -> bool:
    """Whether this run of the service (not an earlier one) wrote ``text`` to its log."""
    try:
        with open(record.log, "rb") as handle:
            handle.seek(record.log_offset)
            return text.encode() in handle.read()
    except OSError:
        return False


def tail(path: str | Path, lines: int = 8) -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


def stop(record: ServiceRecord, grace: float = 10.0) -> None:
    """SIGTERM the service's process group, SIGKILL what is left after ``grace``."""
    _signal_group(record.pid, signal.SIGTERM)
    try:
        poll(lambda: not _group_alive(record.pid), grace, f"{record.name} stopped", interval=0.1)
        return
    except TimeoutError:
        _signal_group(record.pid, signal.SIGKILL)
    try:
        poll(lambda: not _group_alive(record.pid), 5, f"{record.name} killed", interval=0.1)
    except TimeoutError:
        pass  # reported by the caller's next look at the process


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    """True while any live (non-zombie) process is in the group."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
