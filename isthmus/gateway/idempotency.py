"""Idempotent creates, shared by every gateway process through the Isthmus DB.

A client that retries a create under the same ``X-OpenStack-Request-ID`` with the
same body gets the first attempt's outcome instead of a second server: the
attempt claims a row; a done row replays the reply (for ``replay_window``); a row
whose attempt is still running is waited for; a row whose attempt failed to hear
the region's answer (timeout, crash) is *recovered*: the region is searched for
what that attempt may have created before anything is created again. An error
reply is never replayed: the row is dropped and a retry really retries.
"""

from __future__ import annotations

import enum
import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from isthmus.db import retry_transient, write_tx
from isthmus.gateway import schema

# Never stored: a replayed create must not hand out a secret again from the DB.
_SECRET_FIELDS = ("adminPass",)
_KEPT_HEADERS = ("Location", "Content-Type")


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


# The metadata key that carries a create's ledger key on the object it made: what
# recovery adopts by (never a same-named object someone else made meanwhile).
CREATE_KEY_METADATA = "isthmus_create_key"


def create_key(user_id: str, project_id: str, api: str, kind: str, client_request_id: str, body: bytes) -> str:
    """Per user: another member of the project who sends the same request id and
    body makes its own create, never gets this one's reply."""
    material = "\0".join((user_id, project_id, api, kind, client_request_id, hashlib.sha256(body).hexdigest()))
    return hashlib.sha256(material.encode()).hexdigest()


class ClaimState(enum.Enum):
    MINE = "mine"  # no earlier attempt: create
    DONE = "done"  # an earlier attempt created it: replay
    RUNNING = "running"  # another attempt is creating it now: wait
    RECOVER = "recover"  # an earlier attempt may have created it: search, then create


@dataclass(frozen=True)
class StoredReply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class Claim:
    state: ClaimState
    owner: str = ""
    reply: StoredReply | None = None
    region: str | None = None  # RECOVER: where the earlier attempt was sent
    started_at: datetime | None = None  # RECOVER: when


def scrub(body: bytes, singular: str) -> bytes:
    """The reply body without secrets (what may be stored and replayed)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    obj = doc.get(singular) if isinstance(doc, dict) else None
    if isinstance(obj, dict) and any(f in obj for f in _SECRET_FIELDS):
        for f in _SECRET_FIELDS:
            obj.pop(f, None)
        return json.dumps(doc).encode()
    return body


class CreateLedger:
    def __init__(self, engine: Engine, *, replay_window: float = 600.0, stale_after: float = 150.0) -> None:
        self.engine = engine
        self.replay_window = timedelta(seconds=replay_window)
        # A pending row not touched for this long lost its attempt (crash): recover it.
        self.stale_after = timedelta(seconds=stale_after)

    def claim(self, key: str, project_id: str, region: str) -> Claim:
        owner = str(uuid.uuid4())
        t = schema.creates

        def attempt() -> Claim:
            now = _now()
            with write_tx(self.engine) as conn:
                conn.execute(t.delete().where(t.c.updated_at < now - self.replay_window - self.stale_after))
                row = conn.execute(sa.select(t).where(t.c.key == key)).mappings().first()
                fresh = {"state": "pending", "owner": owner, "region": region, "resource_id": None, "reply": None,
                         "started_at": now, "updated_at": now}
                if row is None:
                    conn.execute(t.insert().values(key=key, project_id=project_id, **fresh))
                    return Claim(ClaimState.MINE, owner)
                if row["state"] == "done":
                    if now - row["updated_at"] <= self.replay_window:
                        return Claim(ClaimState.DONE, reply=_load(row["reply"]), region=row["region"])
                    conn.execute(t.update().where(t.c.key == key).values(**fresh))
                    return Claim(ClaimState.MINE, owner)
                if row["state"] == "pending" and now - row["updated_at"] < self.stale_after:
                    return Claim(ClaimState.RUNNING)
                # unknown, or pending and abandoned: this attempt takes it over.
                conn.execute(t.update().where(t.c.key == key).values(state="pending", owner=owner, updated_at=now))
                return Claim(ClaimState.RECOVER, owner, region=row["region"], started_at=row["started_at"])

        try:
            return retry_transient(attempt)
        except sa.exc.IntegrityError:  # another process inserted the key first
            return retry_transient(attempt)

    def peek(self, key: str) -> Claim | None:
        """The row as it stands (for a waiter): DONE, RUNNING, or None (gone/unknown)."""
        t = schema.creates
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(t).where(t.c.key == key)).mappings().first()
        if row is None or row["state"] == "unknown":
            return None
        if row["state"] == "done":
            return Claim(ClaimState.DONE, reply=_load(row["reply"]), region=row["region"])
        if _now() - row["updated_at"] >= self.stale_after:
            return None
        return Claim(ClaimState.RUNNING)

    def sent(self, key: str, owner: str, region: str) -> None:
        """The create is about to go to ``region`` (what recovery searches)."""
        self._update(key, owner, region=region, started_at=_now())

    def touch(self, key: str, owner: str) -> None:
        """The attempt is alive: no other process takes it over as abandoned."""
        self._update(key, owner)

    def done(self, key: str, owner: str, resource_id: str | None, reply: StoredReply, region: str) -> None:
        self._update(key, owner, state="done", resource_id=resource_id, reply=_dump(reply), region=region)

    def unknown(self, key: str, owner: str) -> None:
        """The region may have created it; we could not hear (timeout, 5xx on the way)."""
        self._update(key, owner, state="unknown")

    def forget(self, key: str, owner: str) -> None:
        """Nothing was created (an error reply): a retry really retries."""
        t = schema.creates

        def delete() -> None:
            with write_tx(self.engine) as conn:
                conn.execute(t.delete().where(t.c.key == key, t.c.owner == owner))

        retry_transient(delete)

    def _update(self, key: str, owner: str, **values) -> None:
        t = schema.creates

        def update() -> None:
            with write_tx(self.engine) as conn:
                conn.execute(t.update().where(t.c.key == key, t.c.owner == owner)
                             .values(updated_at=_now(), **values))

        retry_transient(update)


def _dump(reply: StoredReply) -> str:
    return json.dumps({"status": reply.status, "headers": reply.headers,
                       "body": reply.body.decode("utf-8", "replace")})


def _load(text: str | None) -> StoredReply:
    doc = json.loads(text or "{}")
    return StoredReply(int(doc.get("status", 202)), [tuple(h) for h in doc.get("headers", [])],
                       str(doc.get("body", "")).encode())


def kept_headers(headers) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers.items() if k in _KEPT_HEADERS]
