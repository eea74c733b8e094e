"""The local plugin's delete journal: ports deleted in this region that central
has not been told of yet, one file per port, on disk before the regional delete.

A delete made while central is unreachable is the region's to report: nothing
else can prove it (an absent port is no proof, a restored region looks the
same). The retry queue in memory dies with neutron-server; this journal does
not. An entry is forgotten once central confirms (or refuses for good).
Several API workers of one server share the directory: each may send an
entry, and sending it twice is harmless (the second finds central's 404).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from pathlib import Path

LOG = logging.getLogger(__name__)
_PORT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,254}$")


class DeleteJournal:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def record(self, port_id: str) -> None:
        """Durable when it returns (written, fsynced, renamed into place)."""
        path = self._path(port_id)
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "w") as out:
            out.write(port_id + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        _fsync_dir(self.directory)

    def forget(self, port_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(port_id).unlink()

    def pending(self) -> list[str]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(name for name in names if _PORT_ID.match(name))

    def _path(self, port_id: str) -> Path:
        if not _PORT_ID.match(port_id):
            raise ValueError(f"not a port id: {port_id!r}")
        return self.directory / port_id


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
