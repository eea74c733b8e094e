"""The upgrade planner (isthmus.operator.upgrade.rollout): pure, every case of the rule."""

from __future__ import annotations

from typing import Any

from isthmus.operator.upgrade import Step, rollout


def child(kind: str, name: str, version: str = "2", deployed: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind, "metadata": {"name": name}, "spec": {"version": version}}
    if deployed:
        out["status"] = {"deployedVersion": deployed}
    return out


# As the umbrella builds them: identity, regions, central, gateway, CCM config.
WANTED = [child("IdentityService", "ids"), child("Region", "r1"), child("Region", "r2"),
          child("CentralNetwork", "cnet"), child("APIGateway", "gw"), child("CloudControllerConfig", "ccm")]


def stored(**deployed: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Every child stored at version 1, deployed as given (default 1)."""
    return {(c["kind"], c["metadata"]["name"]): child(c["kind"], c["metadata"]["name"], "1",
                                                      deployed.get(c["metadata"]["name"], "1")) for c in WANTED}


def versions(children: list[dict[str, Any]]) -> dict[str, str]:
    return {c["metadata"]["name"]: c["spec"]["version"] for c in children}


def test_keystone_first_and_everything_else_held() -> None:
    out, step = rollout(WANTED, stored(), "2")
    assert step == Step("IdentityService", "ids", 1, 5)
    assert versions(out) == {"ids": "2", "cnet": "1", "r1": "1", "r2": "1", "gw": "1", "ccm": "2"}


def test_central_before_the_regions_then_regions_in_order_then_the_gateway() -> None:
    out, step = rollout(WANTED, stored(ids="2"), "2")
    assert step == Step("CentralNetwork", "cnet", 2, 5) and versions(out)["r1"] == "1"
    out, step = rollout(WANTED, stored(ids="2", cnet="2"), "2")
    assert step == Step("Region", "r1", 3, 5) and (versions(out)["r1"], versions(out)["r2"]) == ("2", "1")
    out, step = rollout(WANTED, stored(ids="2", cnet="2", r1="2", r2="2"), "2")
    assert step == Step("APIGateway", "gw", 5, 5) and versions(out)["gw"] == "2"
    out, step = rollout(WANTED, stored(ids="2", cnet="2", r1="2", r2="2", gw="2"), "2")
    assert step is None and set(versions(out).values()) == {"2"}


def test_new_children_take_the_target_and_hold_nobody() -> None:
    out, step = rollout(WANTED, {}, "2")  # a fresh cloud
    assert step == Step("IdentityService", "ids", 1, 5) and set(versions(out).values()) == {"2"}
    some = stored(ids="2", cnet="2")
    del some[("Region", "r1")]  # a region added during the upgrade
    out, step = rollout(WANTED, some, "2")
    assert versions(out)["r1"] == "2" and step == Step("Region", "r1", 3, 5)
    assert versions(out)["r2"] == "2"  # r1 is new: it holds nobody back


def test_the_input_is_not_changed() -> None:
    rollout(WANTED, stored(), "2")
    assert set(versions(WANTED).values()) == {"2"}
