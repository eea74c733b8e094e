"""Migrated schemas kept per release, loaded instead of migrating again.

Migrating every service's database is most of a sandbox's start (Nova's alone
took over two minutes on MariaDB). The result depends only on the installed
releases, so the first ``sandbox up`` on a machine keeps each schema right after
its migration, and later starts load it:

    ${ISTHMUS_SCHEMA_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/isthmus/sandbox-schemas}/<key>/

The key hashes the versions of the packages whose migrations run (and of the
migration machinery), a digest of Isthmus' own migrations and this module's
FORMAT. An entry is one file: a SQLite database (``keystone.sqlite``,
``neutron.sqlite``...) or a ``mariadb-dump`` of one database, named with the
server's version (``nova_cell.10.11.19-MariaDB.sql``), next to a ``.sha256`` file
in ``sha256sum`` format. Entries hold only what the migration wrote: what belongs
to one sandbox (Nova's cell mappings, Keystone's bootstrap, fernet keys) is made
again after a load, by the caller.

Nothing here may break ``up``: a missing, partial or corrupt entry (checksum), a
load that fails, or a cache directory that cannot be written falls back to
migrating, and a good result rewrites the entry. Entries are written to a
temporary file and renamed; one lock file per entry makes a second migration of
the same entry (another region, another sandbox starting at the same time) wait
for the first and load its result instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Bump when what an entry holds, or how it is named, changes.
FORMAT = 2  # 2: keystone.sqlite is bootstrapped
DIR_ENV = "ISTHMUS_SCHEMA_CACHE_DIR"
OFF_ENV = "ISTHMUS_NO_SCHEMA_CACHE"
# Whose migrations run in a sandbox, and what runs them.
PACKAGES = ("keystone", "neutron", "neutron-lib", "nova", "openstack-placement", "glance", "cinder", "octavia",
            "SQLAlchemy", "alembic", "oslo.db")
# Isthmus' own schema (isthmus.sqlite): its migrations and the models they import.
ISTHMUS_SCHEMA_FILES = ("db/migrations", "db/schema.py")
_ISTHMUS_ROOT = Path(__file__).resolve().parent.parent

# Outcomes, as the progress line names them.
CACHED = "from the cache"
MIGRATED = "migrated"


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(DIR_ENV):
        return Path(env[DIR_ENV]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "isthmus" / "sandbox-schemas"


def disabled_by_env(env: Mapping[str, str] | None = None) -> bool:
    value = (os.environ if env is None else env).get(OFF_ENV, "")
    return value.strip().lower() not in ("", "0", "false", "no")


def installed_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    versions = {}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def files_digest(root: Path, relative: tuple[str, ...]) -> str:
    """sha256 over the ``.py`` files (path and content) under each of ``relative``."""
    digest = hashlib.sha256()
    paths: list[Path] = []
    for rel in relative:
        base = root / rel
        paths += sorted(base.rglob("*.py")) if base.is_dir() else [base] if base.exists() else []
    for path in paths:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def compute_key(versions: Mapping[str, str], isthmus_digest: str, fmt: int = FORMAT) -> str:
    """The cache directory's name: a hash of everything a schema depends on."""
    record = json.dumps({"format": fmt, "versions": dict(sorted(versions.items())), "isthmus": isthmus_digest},
                        sort_keys=True)
    return hashlib.sha256(record.encode()).hexdigest()[:24]


def key_inputs() -> dict:
    return {"format": FORMAT, "versions": installed_versions(),
            "isthmus": files_digest(_ISTHMUS_ROOT, ISTHMUS_SCHEMA_FILES)}


def sql_entry(name: str, server_version: str) -> str:
    """A dump's entry name: a dump loads into the server kind and version that made it."""
    return f"{name}.{re.sub(r'[^A-Za-z0-9._-]+', '_', server_version)}.sql"


def checksum_line(data: bytes, entry: str) -> str:
    return f"{hashlib.sha256(data).hexdigest()}  {entry}\n"


def verify(data: bytes, line: str, entry: str) -> bool:
    """Whether a ``.sha256`` line names ``entry`` and matches ``data``."""
    parts = line.split()
    return len(parts) == 2 and parts[1] == entry and parts[0] == hashlib.sha256(data).hexdigest()


class EntryError(RuntimeError):
    """A cache entry that is there but cannot be used (mismatch, unreadable)."""


@dataclass
class SchemaCache:
    """One sandbox start's view of the cache; ``directory`` None: off (migrate everything)."""

    directory: Path | None
    note: str = ""  # why it is off, when it is
    outcomes: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, enabled: bool = True, env: Mapping[str, str] | None = None) -> SchemaCache:
        """The cache of the installed releases; off with ``enabled`` False or the env var."""
        if not enabled or disabled_by_env(env):
            return cls(None, note="off")
        inputs = key_inputs()
        directory = cache_root(env) / compute_key(inputs["versions"], inputs["isthmus"], inputs["format"])
        try:
            directory.mkdir(parents=True, exist_ok=True)
            described = directory / "key.json"
            if not described.exists():
                _write_atomic(described, (json.dumps(inputs, indent=2, sort_keys=True) + "\n").encode())
        except OSError as err:
            return cls(None, note=f"off ({directory}: {err.strerror or err})")
        return cls(directory)

    @property
    def enabled(self) -> bool:
        return self.directory is not None

    # --- entries ---------------------------------------------------------------
    def read(self, entry: str) -> bytes | None:
        """The entry's bytes if present and intact; None if absent; EntryError if damaged."""
        assert self.directory is not None
        data_path, sum_path = self.directory / entry, self.directory / f"{entry}.sha256"
        try:
            data = data_path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            raise EntryError(f"unreadable: {err}") from err
        try:
            line = sum_path.read_text()
        except OSError as err:
            raise EntryError("no checksum") from err
        if not verify(data, line, entry):
            raise EntryError("checksum mismatch")
        return data

    def write(self, entry: str, produce: Callable[[Path], None]) -> None:
        """``produce(path)`` writes the entry to a temporary path; then it replaces the entry."""
        assert self.directory is not None
        fd, tmp = tempfile.mkstemp(prefix=f".{entry}.", suffix=".tmp", dir=self.directory)
        os.close(fd)
        tmp_path = Path(tmp)
        try:
            produce(tmp_path)
            data = tmp_path.read_bytes()
            if not data:
                raise EntryError("empty")
            os.replace(tmp_path, self.directory / entry)
            _write_atomic(self.directory / f"{entry}.sha256", checksum_line(data, entry).encode())
        finally:
            tmp_path.unlink(missing_ok=True)

    @contextlib.contextmanager
    def entry_lock(self, entry: str) -> Iterator[None]:
        """Held while one user migrates an entry: the next one (thread or process) waits, then loads."""
        assert self.directory is not None
        try:
            handle = open(self.directory / f".{entry}.lock", "a+b")
        except OSError:  # a cache we may read but not write: migrate unlocked, store nothing
            yield
            return
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- the one way services use it ------------------------------------------
    def provide(
        self,
        label: str,
        entry: str | None,
        load: Callable[[bytes], None],
        migrate: Callable[[], None],
        save: Callable[[Path], None],
        reset: Callable[[], None],
        why_not: str = "",
    ) -> str:
        """Give ``label``'s database its schema: ``load`` the cached ``entry``, or
        ``migrate`` (after ``reset`` if a load failed half-way) and ``save`` the
        result as the entry. ``entry`` None: this schema cannot be cached here
        (``why_not`` says why, e.g. no mariadb client): migrate. Returns the
        outcome it recorded."""
        if not self.enabled or entry is None:
            migrate()
            return self._record(label, MIGRATED + (f" ({why_not})" if why_not and self.enabled else ""))
        # A hit needs no lock: entries only ever appear whole (rename).
        data, problem = self._read(entry)
        if data is not None:
            problem = self._load(entry, data, load, reset)
            if not problem:
                return self._record(label, CACHED)
        failed = data
        with self.entry_lock(entry):
            # Whoever held the lock may have just (re)written the entry: try that,
            # unless it is the very bytes that failed to load.
            again, problem_again = self._read(entry)
            if again is not None and again != failed:
                problem = self._load(entry, again, load, reset)
                if not problem:
                    return self._record(label, CACHED)
            elif problem_again and not problem:
                problem = problem_again
            migrate()
            try:
                self.write(entry, save)
                stored = "stored"
            except Exception as err:  # noqa: BLE001 - the sandbox runs without the entry
                stored = f"not stored: {_first_line(err)}"
            return self._record(label, f"{MIGRATED} ({'; '.join(p for p in (problem, stored) if p)})")

    def load_only(self, label: str, entry: str, load: Callable[[bytes], None], reset: Callable[[], None]) -> bool:
        """Load ``entry`` if it is there and loads; on a miss (or a damaged entry,
        or a failed load, after ``reset``) record nothing and return False: the
        caller builds the database its own way (and may ``store`` it)."""
        if not self.enabled:
            return False
        data, _ = self._read(entry)
        if data is None or self._load(entry, data, load, reset):
            return False
        self._record(label, CACHED)
        return True

    def store(self, label: str, entry: str, save: Callable[[Path], None], done: str) -> None:
        """Keep what ``save`` writes as ``entry`` (never fails: a note in the summary)."""
        if not self.enabled:
            return
        try:
            self.write(entry, save)
            self._record(label, f"{done} (stored)")
        except Exception as err:  # noqa: BLE001 - the sandbox runs without the entry
            self._record(label, f"{done} (not stored: {_first_line(err)})")

    def _read(self, entry: str) -> tuple[bytes | None, str]:
        try:
            return self.read(entry), ""
        except (EntryError, OSError) as err:
            return None, f"cache entry {entry}: {_first_line(err)}"

    @staticmethod
    def _load(entry: str, data: bytes, load: Callable[[bytes], None], reset: Callable[[], None]) -> str:
        """Load; on failure undo what it left and say what happened ("" when it worked)."""
        try:
            load(data)
            return ""
        except Exception as err:  # noqa: BLE001 - any failure: migrate instead
            reset()
            return f"loading {entry} failed: {_first_line(err)}"

    def _record(self, label: str, outcome: str) -> str:
        with self._lock:
            self.outcomes.append((label, outcome))
        return outcome

    def summary(self) -> str:
        """One progress line: where each schema came from."""
        with self._lock:
            outcomes = list(self.outcomes)
        if not outcomes:
            return ""
        where = str(self.directory) if self.directory else f"schema cache {self.note or 'off'}"
        cached = [label for label, outcome in outcomes if outcome == CACHED]
        others = [f"{label} {outcome}" for label, outcome in outcomes if outcome != CACHED]
        parts = [f"{len(cached)} of {len(outcomes)} from the cache", *([", ".join(others)] if others else [])]
        return f"schemas: {'; '.join(parts)} [{where}]"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)  # as the services' own tools would have made it (mkstemp: 0600)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


class SQLiteFile:
    """How a SQLite database moves in and out of the cache."""

    def __init__(self, target: Path, after_load: Callable[[], None] | None = None) -> None:
        self.target, self.after_load = target, after_load

    def remove(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.target}{suffix}").unlink(missing_ok=True)

    def load(self, data: bytes) -> None:
        import sqlite3

        self.remove()
        _write_atomic(self.target, data)
        check = sqlite3.connect(self.target)
        try:  # raises on a file that is no database; a damaged one does not answer "ok"
            if check.execute("PRAGMA quick_check").fetchone() != ("ok",):
                raise EntryError("quick_check failed")
        finally:
            check.close()
        if self.after_load is not None:
            self.after_load()

    def save(self, path: Path) -> None:
        """The backup API copies what is committed (WAL included, the database in
        use or not) into one file."""
        import sqlite3

        source, copy = sqlite3.connect(self.target), sqlite3.connect(path)
        try:
            source.backup(copy)
        finally:
            copy.close()
            source.close()


def provide_sqlite(cache: SchemaCache, label: str, entry: str, target: Path, migrate: Callable[[], None],
                   after_load: Callable[[], None] | None = None) -> str:
    """A SQLite database's schema: the cached file copied to ``target`` (then
    ``after_load()``, which may fail like a load), or ``migrate()`` (which
    creates ``target``) and a consistent copy of it kept."""
    file = SQLiteFile(target, after_load)
    return cache.provide(label, entry, file.load, migrate, file.save, file.remove)
