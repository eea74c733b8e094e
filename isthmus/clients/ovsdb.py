"""A small OVSDB client (RFC 7047 ``transact`` over JSON-RPC) for a region's OVN
Northbound and Southbound databases.

Why not ovsdbapp's IDL: an IDL keeps a replica of the whole database in memory
and a connection open per database; the worker touches a few rows per job in
many regions. This client opens one connection per call, bounded by a timeout
(a hung region never holds a worker), and reads only the rows a condition
selects. The OVSDB protocol and OVN's schemas are public contracts; nothing
here depends on Neutron.
"""

from __future__ import annotations

import itertools
import json
import socket
import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_TIMEOUT = 10.0
_ids = itertools.count(1)


class OvsdbUnavailable(RuntimeError):
    """No server of the remote answered in time (an outage, never an answer)."""


class OvsdbError(RuntimeError):
    """The server refused the transaction (constraint, bad column...)."""


@dataclass(frozen=True)
class TLSFiles:
    key_file: str
    cert_file: str
    ca_file: str


def uuid(value: str) -> list[Any]:
    return ["uuid", value]


def named(name: str) -> list[Any]:
    return ["named-uuid", name]


def omap(values: Mapping[str, str]) -> list[Any]:
    return ["map", [[k, v] for k, v in sorted(values.items())]]


def oset(values: Iterable[Any]) -> list[Any]:
    return ["set", list(values)]


def map_of(value: Any) -> dict[str, Any]:
    """An OVSDB map as a dict."""
    if isinstance(value, list) and value and value[0] == "map":
        return {k: v for k, v in value[1]}
    return {}


def set_of(value: Any) -> list[Any]:
    """An OVSDB set (or a single atom) as a list; uuids as their string."""
    items = value[1] if isinstance(value, list) and value and value[0] == "set" else [value]
    return [i[1] if isinstance(i, list) and i and i[0] == "uuid" else i for i in items if i != []]


def uuid_of(value: Any) -> str | None:
    found = set_of(value)
    return found[0] if found else None


def includes(column: str, values: Mapping[str, str]) -> list[Any]:
    """Condition: the map column holds these pairs."""
    return [column, "includes", omap(values)]


class OvsdbClient:
    """One OVSDB server, or a cluster (``tcp:a:6641,tcp:b:6641``: tried in order)."""

    def __init__(self, remote: str, timeout: float = DEFAULT_TIMEOUT, tls: TLSFiles | None = None) -> None:
        self.remotes = [r.strip() for r in remote.split(",") if r.strip()]
        if not self.remotes:
            raise ValueError("an OVSDB remote is needed (tcp:HOST:PORT, ssl:HOST:PORT or unix:PATH)")
        self.timeout = timeout
        self.tls = tls

    def __repr__(self) -> str:
        return f"OvsdbClient({','.join(self.remotes)})"

    def transact(self, database: str, operations: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run operations as one transaction; their results, in order."""
        reply: list[dict[str, Any]] = self._call("transact", [database, *operations])
        for index, result in enumerate(reply):
            if isinstance(result, dict) and result.get("error"):
                operation = operations[index] if index < len(operations) else {}
                raise OvsdbError(f"{database} {operation.get('op', 'commit')} {operation.get('table', '')}: "
                                 f"{result['error']}: {result.get('details', '')}".rstrip(": "))
        return reply

    def select(self, database: str, table: str, where: list[Any] | None = None,
               columns: list[str] | None = None) -> list[dict[str, Any]]:
        op: dict[str, Any] = {"op": "select", "table": table, "where": where or []}
        if columns is not None:
            op["columns"] = [*columns, "_uuid"] if "_uuid" not in columns else columns
        rows: list[dict[str, Any]] = self.transact(database, [op])[0]["rows"]
        return rows

    # --- transport ---------------------------------------------------------------
    def _call(self, method: str, params: list[Any]) -> Any:
        errors = []
        for remote in self.remotes:
            try:
                return self._call_one(remote, method, params)
            except (OSError, TimeoutError, ValueError) as err:
                errors.append(f"{remote}: {err}")
        raise OvsdbUnavailable("; ".join(errors))

    def _connect(self, remote: str) -> socket.socket:
        kind, _, address = remote.partition(":")
        if kind == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            sock.connect(address)
            return sock
        if kind not in ("tcp", "ssl"):
            raise ValueError(f"unsupported OVSDB remote {remote!r}")
        host, _, port = address.rpartition(":")
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=self.timeout)
        if kind == "ssl":
            if self.tls is None:
                sock.close()
                raise ValueError(f"{remote}: ssl needs a key, certificate and CA")
            context = ssl.create_default_context(cafile=self.tls.ca_file)
            context.check_hostname = False  # OVN's PKI names chassis, not hosts; the CA is the trust
            context.load_cert_chain(self.tls.cert_file, self.tls.key_file)
            sock = context.wrap_socket(sock)
        return sock

    def _call_one(self, remote: str, method: str, params: list[Any]) -> Any:
        deadline = time.monotonic() + self.timeout
        request_id = next(_ids)
        with self._connect(remote) as sock:
            sock.sendall(json.dumps({"method": method, "params": params, "id": request_id}).encode())
            decoder = json.JSONDecoder()
            buffer = ""
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no answer in {self.timeout:.0f}s")
                sock.settimeout(remaining)
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("connection closed before the answer")
                buffer += chunk.decode()
                while buffer:
                    buffer = buffer.lstrip()
                    try:
                        message, end = decoder.raw_decode(buffer)
                    except json.JSONDecodeError:
                        break  # incomplete: read more
                    buffer = buffer[end:]
                    if message.get("method") == "echo":  # the server's keepalive
                        sock.sendall(json.dumps({"result": message.get("params", []),
                                                 "id": message.get("id")}).encode())
                    elif message.get("id") == request_id:
                        if message.get("error"):
                            raise OvsdbError(f"{method}: {message['error']}")
                        return message["result"]
