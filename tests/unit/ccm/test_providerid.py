"""providerID vectors, plus properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from isthmus.ccm.openstack import providerid
from isthmus.ccm.openstack.providerid import ProviderID, ProviderIDError

U = "7b9cf879-7146-417c-abfd-cb4272f0c935"


@pytest.mark.parametrize(
    ("value", "instance_id", "region"),
    [
        ("openstack://us-east-1/testInstanceID", "testInstanceID", "us-east-1"),
        ("/testInstanceID", "testInstanceID", ""),
        ("openstack:///testInstanceID", "testInstanceID", ""),
        ("us-east-1/testInstanceID", "testInstanceID", "us-east-1"),
        (f"openstack:///{U}", U, ""),
        (f"openstack://RegionOne/{U}", U, "RegionOne"),
        (f"/{U}", U, ""),
        ("openstack://a:b. c/x", "x", "a:b. c"),  # regions may hold ':', '.', ' '
        ("openstack:///i\n", "i\n", ""),  # as Go's regexp: [^/] matches a newline, $ is end of text
    ],
)
def test_parse_ok(value: str, instance_id: str, region: str) -> None:
    assert providerid.parse(value) == ProviderID(instance_id, region)


@pytest.mark.parametrize(
    ("value", "normalised"),
    [
        ("openstack://us-east-1-testInstanceID", "openstack://us-east-1-testInstanceID"),
        (f"openstack://{U}", f"openstack://{U}"),
        (U, f"openstack://{U}"),
        (f"other-provider:///{U}", f"other-provider:///{U}"),
        ("aws:///i", "aws:///i"),
        ("openstack:///", "openstack:///"),
        ("openstack://r/a/b", "openstack://r/a/b"),
        ("", "openstack://"),
    ],
)
def test_parse_error_text(value: str, normalised: str) -> None:
    with pytest.raises(ProviderIDError) as err:
        providerid.parse(value)
    assert str(err.value) == (
        f'ProviderID "{normalised}" didn\'t match expected format "openstack://region/InstanceID"'
    )


def test_format_plain_and_regional() -> None:
    assert providerid.format("i", "RegionTwo", regional=False) == "openstack:///i"
    assert providerid.format("i", "RegionTwo", regional=True) == "openstack://RegionTwo/i"


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("True", False), ("1", False), ("", False)])
def test_regional_switch_only_exact_true(value: str, expected: bool) -> None:
    assert providerid.regional_enabled({"OS_CCM_REGIONAL": value}) is expected
    assert providerid.regional_enabled({}) is False


def test_format_reads_env_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OS_CCM_REGIONAL", "true")
    assert providerid.format("i", "R") == "openstack://R/i"
    monkeypatch.setenv("OS_CCM_REGIONAL", "false")
    assert providerid.format("i", "R") == "openstack:///i"


segment = st.text(min_size=0, max_size=20).filter(lambda s: "/" not in s)


@given(instance_id=segment.filter(bool), region=segment, regional=st.booleans())
def test_round_trip(instance_id: str, region: str, regional: bool) -> None:
    parsed = providerid.parse(providerid.format(instance_id, region, regional=regional))
    assert parsed == ProviderID(instance_id, region if regional else "")


@given(st.text(max_size=40))
def test_parse_never_crashes(value: str) -> None:
    try:
        parsed = providerid.parse(value)
    except ProviderIDError as exc:
        assert "didn't match expected format" in str(exc)
    else:
        assert parsed.instance_id and "/" not in parsed.instance_id and "/" not in parsed.region
