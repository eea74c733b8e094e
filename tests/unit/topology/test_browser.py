"""The topology page in a real headless Chromium, served from a fixture model: both
regions, the network band in both, a server in its region and its shadow in the
other, an unhealthy region styled as such after one refresh, and the JSON click."""

from __future__ import annotations

import json
import threading

import pytest

from isthmus.topology import model, web
from tests.browser import artifact_dir, chrome, wait_until
from tests.unit.topology import fixtures as fx

pytestmark = pytest.mark.component  # an HTTP server or headless Chromium (tests/tiers.py)

INTERVAL = 1.0
RED = "rgb(198, 40, 40)"


@pytest.fixture
def served():
    state = web.State()
    state.set(model.build(fx.snapshot()), None)
    server = web.make_server(web.TopologyApp(state, INTERVAL), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


def one(driver, selector: str) -> dict | None:
    """The element's text, position and style, read in one script: the page swaps its
    content every refresh, so a WebElement handle may go stale between two calls."""
    return driver.execute_script(
        "const el = document.querySelector(arguments[0]); if (!el) return null;"
        "const r = el.getBoundingClientRect(); const st = getComputedStyle(el);"
        "return {text: el.innerText, x: r.x, y: r.y, visible: st.display !== 'none',"
        "        border: st.borderTopColor};", selector)


def click(driver, selector: str) -> None:
    assert driver.execute_script(
        "const el = document.querySelector(arguments[0]); if (el) el.click(); return !!el;", selector), selector


def test_page_in_chromium(served, tmp_path) -> None:
    state, url = served
    with chrome() as driver:
        driver.get(url)
        for region in ("CentralRegion", "RegionOne", "RegionTwo"):
            assert one(driver, f'.region.healthy[data-region="{region}"]') is not None, region
            assert one(driver, f'.copy.present[data-network="{fx.NET}"][data-region="{region}"]') is not None
        # Regions are columns: RegionTwo's copy sits right of RegionOne's, in the same band.
        r1 = one(driver, f'.copy[data-network="{fx.NET}"][data-region="RegionOne"]')
        r2 = one(driver, f'.copy[data-network="{fx.NET}"][data-region="RegionTwo"]')
        assert r1 is not None and r2 is not None
        assert r2["x"] > r1["x"] and abs(r2["y"] - r1["y"]) < 2
        server = f'.port.server[data-port="{fx.PORT1}"][data-region="RegionOne"]'
        shown_server = one(driver, server)
        assert shown_server is not None and "tour-regionone" in shown_server["text"]
        shadow = one(driver, f'.port.shadow[data-port="{fx.PORT1}"][data-region="RegionTwo"]')
        assert shadow is not None and "shadow of tour-regionone" in shadow["text"]
        assert one(driver, f'.port.server[data-port="{fx.PORT1}"][data-region="RegionTwo"]') is None

        click(driver, server)
        wait_until(lambda: one(driver, "#detail:not([hidden])"), 5, "the JSON panel opens")
        panel = one(driver, "#detail-json")
        assert panel is not None
        shown = json.loads(panel["text"])
        assert shown["id"] == fx.PORT1 and shown["raw"]["binding:host_id"] == "regionone-compute"

        state.set(model.build(fx.region_two_down(fx.snapshot())), None)  # neutron-RegionTwo stops
        down = wait_until(lambda: one(driver, '.region.unhealthy[data-region="RegionTwo"]'), INTERVAL * 3,
                          "RegionTwo shown unhealthy within one refresh")
        assert "UNHEALTHY" in down["text"] and "ConnectFailure" in down["text"]
        assert down["border"] == RED
        assert one(driver, '.region.healthy[data-region="RegionOne"]') is not None
        assert one(driver, "#detail:not([hidden])") is not None  # the open panel survives the refresh
        driver.save_screenshot(str(artifact_dir(tmp_path) / "topology-unit.png"))
