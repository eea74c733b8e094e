"""The sandbox writes, through isthmus.configs, byte for byte the files it wrote
before the renderer existed (sandbox_configs.golden was captured from the
pre-refactor code, commit 5682f34, with machine-specific paths replaced; regenerated
with render_all() when a sandbox file changes on purpose: since then, [metrics] and [gateway_sync] in xjob.conf,
gateway.conf's placement_policy, and
nova.conf/cinder.conf were added when they moved to isthmus.configs.compute, and Keystone's
in-process [cache] for the sandbox's single worker)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from isthmus.sandbox import admin_api, cinder, gateway, keystone, neutron, nova, runtime, xjob
from isthmus.sandbox.layout import CENTRAL_REGION, STOCK_NEUTRON, Layout

GOLDEN = Path(__file__).with_name("sandbox_configs.golden")

LAYOUTS: dict[str, dict[str, Any]] = {
    "default": dict(),
    "plain": dict(plain=True),
    "nocompute": dict(compute=False),
    "dataplane": dict(dataplane=True, neutron_page_limit=50, regions=("RegionOne", "RegionTwo", "RegionThree")),
    "stock": dict(stock_neutron=True, base_port=31000),
}


def render_all(tmp_path: Path) -> str:
    out: list[str] = []
    for name, options in LAYOUTS.items():
        layout = Layout(state_dir=tmp_path / name / "s", **options)
        regions = [CENTRAL_REGION, *layout.regions] + ([STOCK_NEUTRON] if layout.stock_neutron else [])
        for region in regions:
            neutron.write_config(layout, region)
        gateway.write_config(layout)
        xjob.write_config(layout)
        admin_api.write_config(layout)
        keystone.write_config(layout)
        if layout.compute:
            for region in layout.regions:
                nova.write_config(layout, region)
                cinder.write_config(layout, region)
        for path in sorted(layout.etc.rglob("*")):
            if path.is_file():
                text = path.read_text().replace(str(layout.state_dir), "@STATE@")
                text = text.replace(str(runtime.VENV_ETC), "@VENV_ETC@")
                # The RabbitMQ vhost carries a digest of the state directory's path.
                text = re.sub(r"(isthmus-[0-9]+-)[0-9a-f]{8}-", r"\1@DIGEST@-", text)
                out.append(f"=== {name} {path.relative_to(layout.etc)}\n{text}")
    return "".join(out)


def test_sandbox_files_are_unchanged_by_the_shared_renderer(tmp_path: Path) -> None:
    rendered = render_all(tmp_path)
    golden = GOLDEN.read_text()
    if rendered != golden:
        import difflib

        diff = "".join(difflib.unified_diff(golden.splitlines(True), rendered.splitlines(True), "golden", "now", n=1))
        pytest.fail(f"sandbox configs drifted from the golden files:\n{diff[:4000]}")


def test_central_region_gets_the_isthmus_l3_plugin_unless_plain(tmp_path: Path) -> None:
    from isthmus.configs.neutron import neutron_conf

    layout = Layout(state_dir=tmp_path)
    assert neutron_conf(neutron.values(layout, CENTRAL_REGION))["DEFAULT"]["service_plugins"] == "isthmus_central_l3"
    assert neutron_conf(neutron.values(layout, "RegionOne"))["DEFAULT"]["service_plugins"] == "router"
    plain = Layout(state_dir=tmp_path, plain=True)
    assert neutron_conf(neutron.values(plain, CENTRAL_REGION))["DEFAULT"]["service_plugins"] == "router"
