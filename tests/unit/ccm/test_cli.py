"""``isthmus ccm lookup``: argument handling, JSON output, one-line errors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from isthmus.ccm import lookup
from isthmus.ccm.openstack.model import Server
from isthmus.cli import ccm as ccm_cli

from .fakes import FakeClients, FakeRegion


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="isthmus")
    ccm_cli.register(parser.add_subparsers(dest="component"))
    return parser.parse_args(argv)


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    conf = tmp_path / "cloud.conf"
    conf.write_text("[Global]\nregion=RegionOne\nregions=RegionTwo\n")
    fakes = FakeClients({
        "RegionOne": FakeRegion("RegionOne"),
        "RegionTwo": FakeRegion("RegionTwo", [Server("i2", "node-2", flavor={"original_name": "m1"},
                                                     availability_zone="nova")]),
    })
    orig = lookup.lookup_node
    monkeypatch.setattr(lookup, "lookup_node", lambda *a, **k: orig(*a, **{**k, "make_clients": lambda cfg: fakes}))
    return conf


def test_lookup_by_name_prints_json(world: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OS_CCM_REGIONAL", "true")
    args = parse(["ccm", "lookup", "--cloud-config", str(world), "--node-name", "node-2"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out) == {
        "providerID": "openstack://RegionTwo/i2", "instanceType": "m1", "zone": "nova",
        "region": "RegionTwo", "addresses": [],
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--provider-id", "openstack://Nowhere/i2"], 'didn\'t match supported regions "RegionOne,RegionTwo"'),
        (["--provider-id", "aws:///i2"], "didn't match expected format"),
        (["--node-name", "ghost"], "instance not found"),
    ],
)
def test_lookup_errors_are_one_line(world: Path, capsys: pytest.CaptureFixture[str],
                                    extra: list[str], message: str) -> None:
    args = parse(["ccm", "lookup", "--cloud-config", str(world), *extra])
    assert args.func(args) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.count("\n") == 1 and message in out.err


def test_bad_config_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "cloud.conf"
    conf.write_text("[Global\n")
    args = parse(["ccm", "lookup", "--cloud-config", str(conf), "--node-name", "x"])
    assert args.func(args) == 1
    assert "expected right bracket" in capsys.readouterr().err


def test_name_and_provider_id_are_exclusive() -> None:
    with pytest.raises(SystemExit):
        parse(["ccm", "lookup", "--cloud-config", "f", "--node-name", "a", "--provider-id", "/b"])
    with pytest.raises(SystemExit):
        parse(["ccm", "lookup", "--cloud-config", "f"])
