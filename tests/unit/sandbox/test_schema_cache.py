"""The schema cache: its key, its entries' checksums, and every fallback to migrating."""

import os
import sqlite3
import threading

import pytest

from isthmus.sandbox import schema_cache
from isthmus.sandbox.schema_cache import CACHED, SchemaCache, compute_key, provide_sqlite

VERSIONS = {"nova": "34.0.0", "keystone": "30.0.0", "neutron": "29.0.0"}


class Service:
    """A service's schema step, recorded: what a real one does with subprocesses."""

    def __init__(self, fail_load: bool = False) -> None:
        self.calls: list[str] = []
        self.loaded: list[bytes] = []
        self.fail_load = fail_load

    def load(self, data: bytes) -> None:
        self.calls.append("load")
        if self.fail_load:
            raise RuntimeError("ERROR 1064 (42000) at line 3: syntax error\nmore")
        self.loaded.append(data)

    def migrate(self) -> None:
        self.calls.append("migrate")

    def save(self, path) -> None:
        self.calls.append("save")
        path.write_bytes(b"CREATE TABLE t (id INT);\n")

    def reset(self) -> None:
        self.calls.append("reset")

    def provide(self, cache: SchemaCache, label: str = "nova_api-RegionOne", entry: str = "nova_api.sql") -> str:
        return cache.provide(label, entry, self.load, self.migrate, self.save, self.reset)


@pytest.fixture
def cache(tmp_path):
    return SchemaCache(tmp_path / "key")


@pytest.fixture(autouse=True)
def _key_dir(tmp_path):
    (tmp_path / "key").mkdir()


# --- the key ---------------------------------------------------------------------------

def test_key_is_stable_and_ignores_the_order_of_versions():
    assert compute_key(VERSIONS, "abc") == compute_key(dict(reversed(list(VERSIONS.items()))), "abc")
    assert len(compute_key(VERSIONS, "abc")) == 24


@pytest.mark.parametrize("change", [
    lambda v, d, f: ({**v, "nova": "34.0.1"}, d, f),          # a release
    lambda v, d, f: ({**v, "octavia": "19.0.0"}, d, f),       # a package more
    lambda v, d, f: (v, "abd", f),                             # Isthmus' migrations
    lambda v, d, f: (v, d, f + 1),                             # the cache's own format
])
def test_key_changes_with_every_input(change):
    before = (VERSIONS, "abc", schema_cache.FORMAT)
    assert compute_key(*before) != compute_key(*change(*before))


def test_installed_versions_names_a_missing_package():
    versions = schema_cache.installed_versions(("isthmus", "no-such-package-isthmus-test"))
    assert versions["no-such-package-isthmus-test"] == "absent"
    assert versions["isthmus"] != "absent"


def test_files_digest_covers_paths_and_contents(tmp_path):
    (tmp_path / "db" / "migrations").mkdir(parents=True)
    (tmp_path / "db" / "migrations" / "0001.py").write_text("a = 1\n")
    (tmp_path / "db" / "schema.py").write_text("b = 2\n")
    (tmp_path / "db" / "migrations" / "notes.txt").write_text("ignored")
    first = schema_cache.files_digest(tmp_path, ("db/migrations", "db/schema.py", "db/absent.py"))
    (tmp_path / "db" / "migrations" / "notes.txt").write_text("still ignored")
    assert schema_cache.files_digest(tmp_path, ("db/migrations", "db/schema.py", "db/absent.py")) == first
    (tmp_path / "db" / "migrations" / "0002.py").write_text("")
    second = schema_cache.files_digest(tmp_path, ("db/migrations", "db/schema.py"))
    assert second != first
    (tmp_path / "db" / "schema.py").write_text("b = 3\n")
    assert schema_cache.files_digest(tmp_path, ("db/migrations", "db/schema.py")) != second


def test_cache_root_follows_env(tmp_path):
    assert schema_cache.cache_root({"ISTHMUS_SCHEMA_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert schema_cache.cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "isthmus" / "sandbox-schemas"
    assert schema_cache.cache_root({}).parts[-3:] == (".cache", "isthmus", "sandbox-schemas")


@pytest.mark.parametrize("value,off", [("1", True), ("yes", True), ("", False), ("0", False), ("false", False)])
def test_env_turns_it_off(tmp_path, value, off):
    cache = SchemaCache.open(env={"ISTHMUS_NO_SCHEMA_CACHE": value, "ISTHMUS_SCHEMA_CACHE_DIR": str(tmp_path)})
    assert cache.enabled is not off


def test_open_describes_its_key_and_survives_an_unwritable_root(tmp_path):
    cache = SchemaCache.open(env={"ISTHMUS_SCHEMA_CACHE_DIR": str(tmp_path / "root")})
    assert cache.enabled and cache.directory is not None and (cache.directory / "key.json").exists()
    (tmp_path / "file").write_text("not a directory")
    broken = SchemaCache.open(env={"ISTHMUS_SCHEMA_CACHE_DIR": str(tmp_path / "file")})
    assert not broken.enabled and broken.note.startswith("off (")


def test_sql_entry_names_the_server_version():
    entry = schema_cache.sql_entry("nova_cell", "10.11.19-MariaDB-0+deb12u1")
    assert entry == "nova_cell.10.11.19-MariaDB-0_deb12u1.sql"


# --- entries and their checksums -------------------------------------------------------

def test_write_then_read_round_trips_with_a_sha256sum_line(cache):
    cache.write("placement.sql", lambda path: path.write_bytes(b"schema"))
    assert cache.read("placement.sql") == b"schema"
    line = (cache.directory / "placement.sql.sha256").read_text()
    assert line.endswith("  placement.sql\n") and len(line.split()[0]) == 64
    assert not [p for p in cache.directory.iterdir() if p.name.endswith(".tmp")]


def test_absent_entry_reads_as_none(cache):
    assert cache.read("nova_api.sql") is None


@pytest.mark.parametrize("damage", [
    lambda d: (d / "e.sql").write_bytes(b"schemA"),        # bit rot
    lambda d: (d / "e.sql").write_bytes(b"sche"),          # truncated copy
    lambda d: (d / "e.sql.sha256").unlink(),               # half-written entry
    lambda d: (d / "e.sql.sha256").write_text("garbage"),
    lambda d: (d / "e.sql.sha256").write_text((d / "e.sql.sha256").read_text().replace("e.sql", "f.sql")),
])
def test_a_damaged_entry_is_an_error(cache, damage):
    cache.write("e.sql", lambda path: path.write_bytes(b"schema"))
    damage(cache.directory)
    with pytest.raises(schema_cache.EntryError):
        cache.read("e.sql")


def test_a_failed_or_empty_write_leaves_nothing(cache):
    def boom(path):
        path.write_bytes(b"partial")
        raise RuntimeError("mariadb-dump died")

    with pytest.raises(RuntimeError):
        cache.write("e.sql", boom)
    with pytest.raises(schema_cache.EntryError):
        cache.write("e.sql", lambda path: None)
    assert sorted(p.name for p in cache.directory.iterdir()) == []


# --- provide: load, or migrate and store ---------------------------------------------

def test_miss_migrates_and_stores_then_a_hit_loads(cache):
    first = Service()
    assert first.provide(cache) == "migrated (stored)"
    assert first.calls == ["migrate", "save"]
    second = Service()
    assert second.provide(cache) == CACHED
    assert second.calls == ["load"] and second.loaded == [b"CREATE TABLE t (id INT);\n"]


def test_corrupt_entry_migrates_and_rewrites_it(cache):
    Service().provide(cache)
    (cache.directory / "nova_api.sql").write_bytes(b"DROP DATABASE mysql;\n")
    service = Service()
    outcome = service.provide(cache)
    assert outcome == "migrated (cache entry nova_api.sql: checksum mismatch; stored)"
    assert service.calls == ["migrate", "save"]  # the damaged bytes were never loaded
    assert cache.read("nova_api.sql") == b"CREATE TABLE t (id INT);\n"


def test_load_that_fails_resets_migrates_and_rewrites(cache):
    Service().provide(cache)
    service = Service(fail_load=True)
    outcome = service.provide(cache)
    assert outcome == "migrated (loading nova_api.sql failed: ERROR 1064 (42000) at line 3: syntax error; stored)"
    assert service.calls == ["load", "reset", "migrate", "save"]


def test_a_cache_it_cannot_write_still_migrates(cache, monkeypatch):
    service = Service()
    monkeypatch.setattr(service, "save", lambda path: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    assert service.provide(cache) == "migrated (not stored: [Errno 28] No space left on device)"
    assert service.calls == ["migrate"]
    assert cache.read("nova_api.sql") is None


def test_a_read_only_cache_still_loads_and_migrates(cache):
    Service().provide(cache, entry="placement.sql")
    cache.directory.chmod(0o555)
    try:
        if os.access(cache.directory, os.W_OK):
            pytest.skip("running as root: a read-only directory is still writable")
        assert Service().provide(cache, entry="placement.sql") == CACHED
        service = Service()
        outcome = service.provide(cache, entry="nova_api.sql")
        assert outcome.startswith("migrated (not stored: ") and service.calls == ["migrate"]
    finally:
        cache.directory.chmod(0o755)


def test_an_unopenable_lock_does_not_stop_a_migration(cache, monkeypatch):
    real_open = open

    def no_lock(path, *args, **kwargs):
        if str(path).endswith(".lock"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_lock)
    service = Service()
    assert service.provide(cache) == "migrated (stored)"
    assert service.calls == ["migrate", "save"]


def test_a_failed_migration_fails_and_stores_nothing(cache, monkeypatch):
    service = Service()
    failure = RuntimeError("nova-manage api_db sync failed")
    monkeypatch.setattr(service, "migrate", lambda: (_ for _ in ()).throw(failure))
    with pytest.raises(RuntimeError, match="api_db sync"):
        service.provide(cache)
    assert cache.read("nova_api.sql") is None


def test_off_or_uncacheable_only_migrates(tmp_path):
    off = SchemaCache(None, note="off")
    service = Service()
    assert service.provide(off) == "migrated" and service.calls == ["migrate"]
    on = SchemaCache(tmp_path / "key")
    service = Service()
    assert on.provide("cinder-RegionOne", None, service.load, service.migrate, service.save, service.reset,
                      why_not="no mariadb-dump client") == "migrated (no mariadb-dump client)"
    assert service.calls == ["migrate"]


def _second_asks_while_first_migrates(cache, monkeypatch) -> tuple[dict[str, str], Service, bool]:
    """A first Service migrating slowly and a second one asking for the same entry
    meanwhile (two regions or sandboxes): both outcomes, the second Service, and
    whether the second was still waiting while the first migrated."""
    started, release = threading.Event(), threading.Event()
    first, second = Service(), Service()

    def slow_migrate():
        first.calls.append("migrate")
        started.set()
        release.wait(5)

    monkeypatch.setattr(first, "migrate", slow_migrate)
    outcomes: dict[str, str] = {}
    one = threading.Thread(target=lambda: outcomes.update(one=first.provide(cache)))
    one.start()
    assert started.wait(5)
    two = threading.Thread(target=lambda: outcomes.update(two=second.provide(cache)))
    two.start()
    two.join(0.3)
    waited = two.is_alive()
    release.set()
    one.join(5)
    two.join(5)
    return outcomes, second, waited


def test_concurrent_misses_migrate_once(cache, monkeypatch):
    """Two regions (or sandboxes) on a cold cache: the second waits for the first's
    migration and loads its result instead of migrating again."""
    outcomes, second, waited = _second_asks_while_first_migrates(cache, monkeypatch)
    assert waited  # on the entry's lock, not migrating
    assert outcomes == {"one": "migrated (stored)", "two": CACHED}
    assert second.calls == ["load"]


def test_summary_says_where_each_schema_came_from(cache):
    Service().provide(cache, "nova_api-RegionOne")
    Service().provide(cache, "nova_api-RegionTwo")
    cache.store("keystone catalogue", "keystone-catalog.sqlite", lambda path: path.write_bytes(b"db"), "registered")
    assert cache.summary() == (f"schemas: 1 of 3 from the cache; nova_api-RegionOne migrated (stored), "
                               f"keystone catalogue registered (stored) [{cache.directory}]")
    assert SchemaCache(None).summary() == ""


# --- SQLite entries ----------------------------------------------------------------------

def _make_db(path, rows=1):
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE alembic_version (version_num TEXT)")
    conn.executemany("INSERT INTO alembic_version VALUES (?)", [(f"v{i}",) for i in range(rows)])
    conn.commit()
    return conn  # left open: its rows may still sit in the -wal file


def test_sqlite_entry_copies_a_consistent_database(cache, tmp_path):
    source = tmp_path / "state" / "neutron-CentralRegion.sqlite"
    source.parent.mkdir()
    held = []
    assert provide_sqlite(cache, "neutron-CentralRegion", "neutron.sqlite", source,
                          lambda: held.append(_make_db(source, rows=3))) == "migrated (stored)"
    target = tmp_path / "state" / "neutron-RegionOne.sqlite"
    stale_wal = target.with_name(target.name + "-wal")
    stale_wal.write_bytes(b"stale wal from an earlier sandbox")
    outcome = provide_sqlite(cache, "neutron-RegionOne", "neutron.sqlite", target, lambda: pytest.fail("migrated"))
    assert outcome == CACHED
    assert not stale_wal.exists()
    rows = sqlite3.connect(target).execute("SELECT count(*) FROM alembic_version").fetchone()
    assert rows == (3,)
    held[0].close()


def test_sqlite_entry_that_is_not_a_database_is_replaced(cache, tmp_path):
    cache.write("glance.sqlite", lambda path: path.write_bytes(b"not sqlite, but its checksum is right" * 200))
    target = tmp_path / "glance-RegionOne.sqlite"
    outcome = provide_sqlite(cache, "glance-RegionOne", "glance.sqlite", target, lambda: _make_db(target).close())
    assert outcome == "migrated (loading glance.sqlite failed: file is not a database; stored)"
    assert sqlite3.connect(target).execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)
    assert cache.read("glance.sqlite").startswith(b"SQLite format 3")


def test_load_only_loads_a_hit_and_leaves_a_miss_to_the_caller(cache):
    service = Service()
    assert not cache.load_only("keystone catalogue", "keystone-catalog.sqlite", service.load, service.reset)
    assert service.calls == [] and cache.outcomes == []
    cache.store("keystone catalogue", "keystone-catalog.sqlite", lambda path: path.write_bytes(b"db"), "registered")
    assert cache.load_only("keystone catalogue", "keystone-catalog.sqlite", service.load, service.reset)
    assert service.loaded == [b"db"]
    broken = Service(fail_load=True)
    assert not cache.load_only("keystone catalogue", "keystone-catalog.sqlite", broken.load, broken.reset)
    assert broken.calls == ["load", "reset"]
    assert not SchemaCache(None).load_only("k", "keystone-catalog.sqlite", service.load, service.reset)


def test_store_never_fails(cache):
    full = OSError(28, "No space")
    cache.store("keystone catalogue", "e.sqlite", lambda path: (_ for _ in ()).throw(full), "registered")
    assert cache.outcomes == [("keystone catalogue", "registered (not stored: [Errno 28] No space)")]
    SchemaCache(None).store("k", "e.sqlite", lambda path: pytest.fail("stored"), "registered")


def test_after_a_damaged_entry_the_next_user_loads_the_rewritten_one(cache, monkeypatch):
    """Two regions meet the same corrupt entry: the first migrates and rewrites
    it, the second (waiting on the lock meanwhile) loads the rewrite."""
    Service().provide(cache)
    assert cache.directory is not None
    (cache.directory / "nova_api.sql").write_bytes(b"rot")
    outcomes, second, _ = _second_asks_while_first_migrates(cache, monkeypatch)
    assert outcomes["one"].startswith("migrated (cache entry nova_api.sql: checksum mismatch")
    assert outcomes["two"] == CACHED and second.calls == ["load"]


def test_the_same_bytes_that_failed_to_load_are_not_tried_again(cache):
    Service().provide(cache)
    service = Service(fail_load=True)
    service.provide(cache)
    assert service.calls == ["load", "reset", "migrate", "save"]  # one load, not two
