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
import re
import secrets as _secrets
from collections.abc import Mapping
from datetime import datetime, timedelta

from isthmus.operator import GROUP

ROTATED_AT = f"{GROUP}/fernet-keys-rotated-at"
# keystone's [fernet_tokens] max_active_keys default: staged + primary + one secondary,
# so tokens issued before the last rotation stay valid until the next one.
MAX_ACTIVE_KEYS = 3

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> timedelta:
    """A Go duration (``24h``, ``1h30m``, ``90s``); ``0`` disables rotation.
    Raises ValueError naming the text otherwise."""
    text = (text or "").strip()
    if text == "0":
        return timedelta(0)
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"fernetRotationInterval: {text!r} is not a duration like 24h, 1h30m or 90s")
    return timedelta(seconds=sum(float(n) * _UNIT_SECONDS[u] for n, u in parts))


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
