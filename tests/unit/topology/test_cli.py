"""``openstack multiregion topology``: table, json, yaml and dot from one model."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from keystoneauth1 import exceptions as ks_exc
from osc_lib import exceptions

from isthmus.cli.osc.v1.topology import ShowTopology
from isthmus.topology import formats, model
from tests.unit.topology import fixtures as fx
from tests.unit.topology.test_collect import FakeSession, routes_for


def run(*argv: str, routes: dict | None = None) -> str:
    out = io.StringIO()
    session = FakeSession(routes or routes_for(fx.snapshot()))
    # A stand-in for cliff's App: the command reads only these.
    app: Any = SimpleNamespace(client_manager=SimpleNamespace(session=session, interface="public"), stdout=out)
    cmd = ShowTopology(app, None)
    args = cmd.get_parser("openstack multiregion topology").parse_args(list(argv))
    assert cmd.take_action(args) == 0
    return out.getvalue()


def test_table_shows_regions_network_per_region_routers_and_jobs() -> None:
    text = run()
    assert re.search(r"\| RegionTwo\s+\| ok\s+\| az2", text)
    assert re.search(rf"tour-net \({fx.NET}\)\s+\| CentralRegion\s+\| ACTIVE\s+\| vxlan/1001", text)
    assert re.search(r"\| RegionOne\s+\| ACTIVE\s+\| vxlan/1001\s+\| tour-regionone 10.10.0.11\s+\| "
                     r"tour-regiontwo 10.10.0.12", text)
    assert "half-RegionTwo" in text and "Jobs: backlog 1 (NEW 1, RUNNING 0, FAIL 1)" in text
    assert "router_sync" in text and "availability_zone_hints" in text


def test_table_marks_an_unreachable_region() -> None:
    routes = routes_for(fx.snapshot())
    routes[("network", "RegionTwo", "/v2.0/networks")] = ks_exc.ConnectFailure("refused")
    text = run("-f", "table", routes=routes)
    assert re.search(r"\| RegionTwo\s+\| UNHEALTHY", text)
    assert "unknown (region unreadable)" in text


def test_json_is_the_model_without_raw_answers_unless_asked() -> None:
    data = json.loads(run("-f", "json"))
    assert [r["name"] for r in data["regions"]] == ["CentralRegion", "RegionOne", "RegionTwo"]
    two = data["networks"][0]["copies"]["RegionTwo"]
    assert two["segmentation_id"] == 1001 and [s["id"] for s in two["shadows"]] == [fx.PORT1]
    assert "raw" not in two
    assert json.loads(run("-f", "json", "--raw"))["networks"][0]["copies"]["RegionTwo"]["raw"]["id"] == fx.NET


def test_yaml_equals_json() -> None:
    as_yaml, as_json = yaml.safe_load(run("--format", "yaml")), json.loads(run("--format", "json"))
    as_yaml.pop("collected_at"), as_json.pop("collected_at")  # two collections: a second apart at times
    assert as_yaml == as_json


def test_network_filter() -> None:
    data = json.loads(run("--network", "tour-net", "-f", "json"))
    assert [n["name"] for n in data["networks"]] == ["tour-net"] and data["routers"] == []
    with pytest.raises(exceptions.CommandError, match="no central network"):
        run("--network", "other")


def test_dot_has_a_cluster_per_region_and_shadow_edges() -> None:
    text = run("--format", "dot")
    assert text.startswith("digraph topology {") and text.rstrip().endswith("}")
    for region in ("CentralRegion", "RegionOne", "RegionTwo"):
        assert f'subgraph "cluster_{region}"' in text
    assert f'"shadow:RegionTwo:{fx.PORT1}" -> "port:{fx.PORT1}"' in text
    assert f'"half:half-RegionOne" -> "router:{fx.ROUTER}"' in text


def test_dot_marks_drift_and_unhealthy_regions() -> None:
    snap = fx.region_two_down(fx.snapshot())
    snap.regions[0].networks = [fx.network(name='say "hi"')]
    text = formats.to_dot(model.build(snap))
    assert 'label="RegionTwo (UNHEALTHY)", color=red' in text
    assert "DRIFT: name" in text and 'say \\"hi\\"' in text


@pytest.mark.component  # runs Graphviz's dot (tests/tiers.py)
@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
def test_dot_is_valid_graphviz() -> None:
    subprocess.run(["dot", "-Tsvg"], input=run("-f", "dot"), text=True, check=True, capture_output=True)


def test_registered_as_an_openstack_multiregion_command() -> None:
    """pyproject's entry point names the command class (what 'openstack' loads)."""
    import importlib
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    target = project["project"]["entry-points"]["openstack.multiregion.v1"]["multiregion_topology"]
    module, _, name = target.partition(":")
    assert getattr(importlib.import_module(module), name) is ShowTopology
