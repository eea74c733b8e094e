"""Fernet key rotation, as ``keystone-manage fernet_rotate`` does it, applied by the operator
to the key Secret that every Keystone pod mounts.

The operator rotates rather than a CronJob running keystone-manage: the keys live in a
Secret, and a Job writing Secrets would need a service account with that right; the
operator already owns the Secret. Keystone reads its key repository on every token
operation, and kubelet refreshes a mounted Secret in place, so no pod restarts.

Why the order is safe across pods that see the new Secret at different times: the new
primary is the key that was *staged* (``0``) in the previous set, which every pod already
accepts; a pod still on the previous set decrypts the new primary's tokens.
"""

from __future__ import annotations

import base64
import math
import re
import secrets as _secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from isthmus.kube.durations import parse_duration as go_duration
from isthmus.operator import GROUP

ROTATED_AT = f"{GROUP}/fernet-keys-rotated-at"
# keystone's [fernet_tokens] max_active_keys default: staged + primary + one secondary,
# so tokens issued before the last rotation stay valid until the next one.
MAX_ACTIVE_KEYS = 3
# Keystone tries every key on every token it validates: an interval that needs more
# keys than this is refused (identity.fernetRotationInterval), not served slowly.
MAX_KEYS = 100
DURATION_PATTERN = r"^(0|([0-9]+(\.[0-9]+)?(h|m|s|ms))+)$"


def keys_needed(interval: timedelta, token_expiration: timedelta, allow_expired_window: timedelta) -> int:
    """How many keys the repository keeps so that no token dies early.

    A token is signed by the primary. Each rotation pushes it one secondary further,
    and it must survive every rotation within the token's life: its expiration, plus
    the window in which keystone still validates an expired token for a service
    (``allow_expired_window``). That is ceil(life / interval) secondaries, plus the
    primary and the staged key. With no rotation, keystone's default."""
    if interval <= timedelta(0):
        return MAX_ACTIVE_KEYS
    return math.ceil((token_expiration + allow_expired_window) / interval) + 2


def check_keys(interval: timedelta, token_expiration: timedelta, allow_expired_window: timedelta) -> str | None:
    """Why the rotation interval cannot be served (None: it can), naming the field."""
    needed = keys_needed(interval, token_expiration, allow_expired_window)
    if needed <= MAX_KEYS:
        return None
    life = token_expiration + allow_expired_window
    shortest = timedelta(seconds=math.ceil(life.total_seconds() / (MAX_KEYS - 2)))
    return (f"fernetRotationInterval: {interval} would keep {needed} fernet keys (tokens live "
            f"tokenExpiration {token_expiration} + allowExpiredWindow {allow_expired_window}); at most "
            f"{MAX_KEYS}: rotate every {shortest} or less often, or shorten the tokens' life")

def parse_duration(text: str, field: str = "fernetRotationInterval") -> timedelta:
    """A duration of the resource's ``field``: Go's syntax (the Kubernetes
    world's, isthmus.kube.durations) in the form ``DURATION_PATTERN`` admits
    (the CRD's pattern: no sign, hours down to milliseconds); ``0`` is none.
    Raises ValueError naming the field and the text otherwise."""
    text = (text or "").strip()
    if not re.fullmatch(DURATION_PATTERN.strip("^$"), text):
        raise ValueError(f"{field}: {text!r} is not a duration like 24h, 1h30m or 90s")
    return timedelta(seconds=go_duration(text))


@dataclass(frozen=True)
class KeyPolicy:
    """An IdentityService's rotation interval and its tokens' life."""

    interval: timedelta
    token_expiration: timedelta
    allow_expired_window: timedelta

    @classmethod
    def of(cls, identity: Mapping[str, Any]) -> KeyPolicy:
        """From a defaulted identity spec; ValueError names the field that is wrong."""
        return cls(parse_duration(identity["fernetRotationInterval"]),
                   parse_duration(identity["tokenExpiration"], "tokenExpiration"),
                   parse_duration(identity["allowExpiredWindow"], "allowExpiredWindow"))

    @property
    def max_active(self) -> int:
        return keys_needed(self.interval, self.token_expiration, self.allow_expired_window)

    def problem(self) -> str | None:
        return check_keys(self.interval, self.token_expiration, self.allow_expired_window)


def new_key() -> str:
    return base64.urlsafe_b64encode(_secrets.token_bytes(32)).decode()


def rotate(keys: Mapping[str, str], staged: str, max_active: int = MAX_ACTIVE_KEYS) -> dict[str, str]:
    """One rotation of a key repository ``{"0": staged, "1": ..., "N": primary}``:
    the staged key becomes primary ``N+1``, ``staged`` is the new ``0``, and the oldest
    secondaries go until ``max_active`` keys remain."""
    if "0" not in keys or any(not k.isdigit() for k in keys):
        raise ValueError(f"not a fernet key repository: keys {sorted(keys)}")
    if max_active < 2:
        raise ValueError("max_active must keep a staged and a primary key")
    numbered = sorted(int(k) for k in keys if k != "0")
    out = {str(i): keys[str(i)] for i in numbered}
    out[str((numbered[-1] if numbered else 0) + 1)] = keys["0"]
    out["0"] = staged
    while len(out) > max_active:
        del out[str(min(int(k) for k in out if k != "0"))]
    return out


def valid_stamp(text: str) -> bool:
    try:
        return datetime.fromisoformat(text).tzinfo is not None
    except ValueError:
        return False


def due(rotated_at: str | None, interval: timedelta, now: datetime) -> bool:
    """Whether a rotation is due; never when disabled, and not before a first stamp
    (the keys were just made: stamping them starts the clock)."""
    if interval <= timedelta(0) or not rotated_at:
        return False
    return now - datetime.fromisoformat(rotated_at) >= interval
