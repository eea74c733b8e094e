"""The real operator against kmock: Keystone's fernet keys rotate on the interval."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, tzinfo

import pytest

from isthmus.operator import controllers, fernet
from isthmus.operator.kube_client import secret_text
from tests.unit.operator.kmock_harness import Operator, make

pytestmark = [pytest.mark.asyncio, pytest.mark.component]  # the real operator against kmock (tests/tiers.py)


class OperatorClock(datetime):
    """The operator's notion of now, moved by the test: a rotation happens only when
    the test moves it past the interval, however slowly the machine runs (with the
    wall clock, a busy machine let two rotations pass between two reads)."""

    current = datetime(2026, 1, 1, tzinfo=UTC)

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]  # the clock returns plain datetimes
        return cls.current

    @classmethod
    def advance(cls, seconds: float) -> None:
        cls.current = cls.current + timedelta(seconds=seconds)


async def test_fernet_keys_rotate_on_the_interval_without_restarting_keystone(
        op: Operator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(controllers.identity, "datetime", OperatorClock)  # where the rotation reads the time
    # Tokens live 4 s (no expired window): ceil(4 / 2) + 2 = four keys kept.
    await make(op, regions=[{"name": "RegionOne"}], identity={"memcachedServers": ["mc:11211"],
                                                             "fernetRotationInterval": "2s",
                                                             "tokenExpiration": "4s", "allowExpiredWindow": "0"},
               apiGateway={"enabled": False}, centralNetwork={"enabled": False},
               cloudControllerManager={"enabled": False})
    ids = "cloud-identity"
    await op.converge("IdentityService", ids)
    template = (await op.must_get("Deployment", ids))["spec"]["template"]["metadata"]["annotations"]
    first = secret_text(await op.must_get("Secret", f"{ids}-fernet-keys"))
    assert set(first) == {"0", "1"}
    credentials = secret_text(await op.must_get("Secret", f"{ids}-credential-keys"))

    async def keys_with(names: set[str]) -> dict[str, str] | None:
        keys = secret_text(await op.must_get("Secret", f"{ids}-fernet-keys"))
        return keys if set(keys) == names else None

    OperatorClock.advance(2)  # the interval: the next pass (requeued after it) rotates once
    second = await op.until(lambda: keys_with({"0", "1", "2"}), "first rotation")
    # The staged key became the primary; the primary stays as a secondary; a new key is staged.
    assert second["2"] == first["0"] and second["1"] == first["1"] and second["0"] not in first.values()
    await asyncio.sleep(3)  # longer than the interval in real time: nothing rotates until the clock moves
    assert await keys_with({"0", "1", "2"}) == second
    OperatorClock.advance(2)
    third = await op.until(lambda: keys_with({"0", "1", "2", "3"}), "second rotation (four keys: none dropped)")
    assert third["3"] == second["0"] and third["1"] == first["1"]
    OperatorClock.advance(2)
    fourth = await op.until(lambda: keys_with({"0", "2", "3", "4"}), "third rotation (oldest secondary dropped)")
    assert fourth["4"] == third["0"] and fourth["2"] == second["2"]
    conf = secret_text(await op.must_get("Secret", f"{ids}-config"))["keystone.conf"]
    assert "max_active_keys = 4" in conf and "expiration = 4" in conf and "allow_expired_window = 0" in conf
    stored = await op.must_get("Secret", f"{ids}-fernet-keys")
    stamp = stored["metadata"]["annotations"][fernet.ROTATED_AT]

    async def status_stamp() -> bool:
        ids_obj = await op.must_get("IdentityService", ids)
        return ids_obj["status"].get("fernetKeysRotatedAt", "") >= stamp
    await op.until(status_stamp, "status.fernetKeysRotatedAt")
    # Keystone reads the mounted keys in place: no rollout; credential keys never rotate.
    assert (await op.must_get("Deployment", ids))["spec"]["template"]["metadata"]["annotations"] == template
    assert secret_text(await op.must_get("Secret", f"{ids}-credential-keys")) == credentials
