"""Fernet rotation as keystone-manage fernet_rotate does it (pure parts)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from isthmus.operator import crds, fernet
from isthmus.operator.kube_client import Kube


@pytest.mark.parametrize("text,seconds", [("24h", 86400), ("1h30m", 5400), ("90s", 90), ("1.5h", 5400),
                                          ("500ms", 0.5), ("0", 0)])
def test_go_durations(text: str, seconds: float) -> None:
    assert fernet.parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "24", "1d", "h", "1h 30m", "-1h", "24hours"])
def test_bad_durations_name_the_field(text: str) -> None:
    with pytest.raises(ValueError, match="fernetRotationInterval"):
        fernet.parse_duration(text)


def test_the_crd_pattern_accepts_exactly_what_the_parser_accepts() -> None:
    pattern = crds.crd("IdentityService")["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
        "properties"]["spec"]["properties"]["fernetRotationInterval"]["pattern"]
    for text in ("24h", "1h30m", "90s", "1.5h", "500ms", "0", "", "24", "1d", "1h 30m", "-1h", "24hours"):
        try:
            fernet.parse_duration(text)
            parsed = True
        except ValueError:
            parsed = False
        assert bool(re.fullmatch(pattern.strip("^$"), text)) == parsed, text


def test_the_staged_key_becomes_primary_and_a_new_staged_key_appears() -> None:
    assert fernet.rotate({"0": "s0", "1": "p1"}, "s1") == {"0": "s1", "1": "p1", "2": "s0"}


def test_the_oldest_secondaries_go_beyond_max_active() -> None:
    keys = {"0": "s", "1": "a", "2": "b", "3": "c"}
    assert fernet.rotate(keys, "new", max_active=3) == {"0": "new", "3": "c", "4": "s"}
    assert fernet.rotate(keys, "new", max_active=5) == {"0": "new", "1": "a", "2": "b", "3": "c", "4": "s"}


def test_a_pod_on_the_previous_set_accepts_the_new_primary() -> None:
    # Why the order matters: the new primary must be a key every pod already has.
    before = {"0": "s0", "1": "p1"}
    after = fernet.rotate(before, "s1")
    assert after[max(after, key=int)] in before.values()


@pytest.mark.parametrize("keys", [{"1": "x"}, {"0": "x", "primary": "y"}])
def test_not_a_key_repository(keys: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        fernet.rotate(keys, "n")


def test_due() -> None:
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    day = timedelta(hours=24)
    assert fernet.due("2026-12-01T12:00:00+00:00", day, now)
    assert not fernet.due("2026-12-01T12:00:01+00:00", day, now)
    assert not fernet.due(None, day, now)  # first sight: stamp, don't rotate
    assert not fernet.due("2026-01-01T00:00:00+00:00", timedelta(0), now)  # disabled


@pytest.mark.parametrize("stamp,valid", [("2026-12-01T12:00:00+00:00", True), ("2026-12-01T12:00:00Z", True),
                                         ("2026-12-01T12:00:00", False), ("yesterday", False)])
def test_stamps(stamp: str, valid: bool) -> None:
    assert fernet.valid_stamp(stamp) is valid


class RecordingKube:
    def __init__(self) -> None:
        self.patches: list[dict] = []

    async def patch(self, kind, namespace, name, patch, subresource=None):
        self.patches.append(patch)
        return None


def as_kube(recording: RecordingKube) -> Kube:
    """The controller only calls patch(), which the recording stand-in has."""
    return cast(Kube, recording)


def keys_secret(annotations: dict[str, str] | None = None) -> dict:
    import base64

    data = {k: base64.b64encode(v.encode()).decode() for k, v in {"0": "s", "1": "a", "2": "p"}.items()}
    return {"kind": "Secret", "metadata": {"name": "ids-fernet-keys", "namespace": "ns", "resourceVersion": "7",
                                           "annotations": annotations or {}}, "data": data}


NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def identity(interval: str, expiration: str = "1h", window: str = "0") -> dict[str, str]:
    """An identity spec's key fields: by default tokens live one interval (three keys)."""
    return {"fernetRotationInterval": interval, "tokenExpiration": expiration, "allowExpiredWindow": window}


@pytest.mark.asyncio
@pytest.mark.parametrize("stamp", [None, "not a time"])
async def test_controller_first_stamps_then_waits_a_whole_interval(stamp) -> None:
    from isthmus.operator.controllers import rotate_fernet_keys

    kube = RecordingKube()
    extra: dict[str, Any] = {}
    annotations = {fernet.ROTATED_AT: stamp} if stamp else {}
    after = await rotate_fernet_keys(as_kube(kube), keys_secret(annotations), identity("1h"), extra,
                                     NOW)
    assert kube.patches == [{"metadata": {"annotations": {fernet.ROTATED_AT: NOW.isoformat()}}}]
    assert after == 3600 and extra["fernetKeysRotatedAt"] == NOW.isoformat()


@pytest.mark.asyncio
async def test_controller_rotates_when_due_conditionally_and_drops_the_oldest() -> None:
    import base64

    from isthmus.operator.controllers import rotate_fernet_keys

    kube = RecordingKube()
    extra: dict[str, Any] = {}
    stamp = (NOW - timedelta(hours=2)).isoformat()
    after = await rotate_fernet_keys(as_kube(kube), keys_secret({fernet.ROTATED_AT: stamp}),
                                     identity("1h"), extra, NOW)
    (patch,) = kube.patches
    assert patch["metadata"]["resourceVersion"] == "7"
    data = patch["data"]
    assert data["1"] is None  # the oldest secondary goes (three keys stay)
    assert base64.b64decode(data["3"]).decode() == "s" and base64.b64decode(data["2"]).decode() == "p"
    assert base64.b64decode(data["0"]).decode() not in ("s", "a", "p")
    assert after == 3600


@pytest.mark.asyncio
async def test_controller_not_due_or_disabled_writes_nothing() -> None:
    from isthmus.operator.controllers import rotate_fernet_keys

    kube = RecordingKube()
    stamp = (NOW - timedelta(minutes=20)).isoformat()
    assert await rotate_fernet_keys(as_kube(kube), keys_secret({fernet.ROTATED_AT: stamp}),
                                    identity("1h"), {}, NOW) == 2400
    assert await rotate_fernet_keys(as_kube(kube), keys_secret({fernet.ROTATED_AT: stamp}),
                                    identity("0"), {}, NOW) is None
    assert kube.patches == []


@pytest.mark.parametrize("interval,expiration,window,keys", [
    ("24h", "24h", "48h", 5),  # the defaults: tokens live 72 h, three rotations, plus primary and staged
    ("1h", "24h", "0", 26),  # the case: 24 h tokens, hourly rotation
    ("1h", "1h", "0", 3),  # keystone's own default count
    ("90m", "1h", "0", 3),
    ("0", "24h", "48h", 3),  # no rotation
])
def test_keys_kept_follow_the_tokens_life(interval: str, expiration: str, window: str, keys: int) -> None:
    assert fernet.KeyPolicy.of(identity(interval, expiration, window)).max_active == keys


def test_a_token_is_never_signed_by_a_key_dropped_before_it_expires() -> None:
    # Simulate: rotate every hour with the rule's key count; a token signed by each
    # primary stays verifiable (its key kept) for its whole 24 h life.
    policy = fernet.KeyPolicy.of(identity("1h", "24h", "0"))
    keys = {"0": "k0", "1": "k1"}
    made = 2
    signed_at: dict[str, int] = {}
    for hour in range(60):
        primary = keys[max(keys, key=int)]
        signed_at.setdefault(primary, hour)
        for key, hour_signed in signed_at.items():
            if hour - hour_signed <= 24:
                assert key in keys.values(), f"key of hour {hour_signed} dropped at hour {hour}"
        keys = fernet.rotate(keys, f"k{made}", max_active=policy.max_active)
        made += 1


def test_an_interval_that_needs_too_many_keys_is_refused_naming_the_field() -> None:
    problem = fernet.KeyPolicy.of(identity("1m", "24h", "48h")).problem()
    assert problem is not None and problem.startswith("fernetRotationInterval: 0:01:00 would keep 4322")
    assert "at most 100" in problem
    assert fernet.KeyPolicy.of(identity("24h", "24h", "48h")).problem() is None
    with pytest.raises(ValueError, match="tokenExpiration: 'a day'"):
        fernet.KeyPolicy.of(identity("1h", "a day"))


@pytest.mark.asyncio
async def test_controller_keeps_as_many_keys_as_the_tokens_need_and_refuses_too_many() -> None:
    from isthmus.operator.controllers import rotate_fernet_keys

    kube = RecordingKube()
    stamp = (NOW - timedelta(hours=2)).isoformat()
    await rotate_fernet_keys(as_kube(kube), keys_secret({fernet.ROTATED_AT: stamp}), identity("1h", "2h"), {}, NOW)
    (patch,) = kube.patches
    assert patch["data"]["1"] is not None and len(patch["data"]) == 4  # four keys needed: the oldest stays
    kube.patches.clear()
    assert await rotate_fernet_keys(as_kube(kube), keys_secret({fernet.ROTATED_AT: stamp}),
                                    identity("1m", "24h", "48h"), {}, NOW) is None
    assert kube.patches == []  # refused: rotating would end valid tokens early
