"""Conformance tier: Tempest's own API tests pass through Isthmus as they
do against one region directly. CI runs the focused lists; ``tools/conformance.sh``
runs the full ones. A test that passes directly and fails through Isthmus fails
this test (``exceptions.txt`` lists design limits, with reasons)."""

from __future__ import annotations

import pytest

from tests.conformance import tempest_runner

# Alone: it compares two Tempest runs, which other tests' load must not skew.
pytestmark = [pytest.mark.integration, pytest.mark.exclusive]


@pytest.fixture(scope="module")
def layout(sandbox):
    from isthmus.sandbox.layout import Layout

    found = Layout.load(sandbox.state_dir)
    tempest_runner.ensure_fixed_network(found)
    return found


# CI runs the compute subset (the gateway's every path); the volume and network
# lists, and the full ones, run with tools/conformance.sh (minutes each).
@pytest.mark.parametrize("list_name", ["compute_ci"])
def test_tempest_passes_through_isthmus_as_it_does_directly(layout, list_name, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"tempest-{list_name}")
    (direct_target, direct), (isthmus_target, isthmus) = tempest_runner.run_both(layout, list_name, out, 2).items()
    assert direct.passed, f"nothing passed directly: Tempest did not run ({out}/direct/logs)"
    lost = tempest_runner.confirmed_regressions(layout, list_name, out, direct, isthmus)
    print(tempest_runner.table({"direct": direct, "isthmus": isthmus}))
    assert not lost, f"pass against {direct_target.compute_region} directly, fail through Isthmus " \
                     f"(logs under {out}/isthmus/logs): {lost}"
