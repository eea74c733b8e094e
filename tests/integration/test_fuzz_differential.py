"""Differential fuzzing (docs/fuzzing.md): no request that the stock
service answers below 500 gets 500 or more from Isthmus.

Seeded and bounded for CI: the same requests every run (``SEED``), a few hundred
per pair. ``tools/fuzz.py campaign`` runs the long version with random seeds.
A failure lists each request with the command that sends it again."""

from __future__ import annotations

import pytest

from tests.fuzz import apis, campaign, targets
from tests.integration.helpers import sandbox_layout

# Alone: a timeout caused by other tests' load must not read as a 5xx Isthmus added.
pytestmark = [pytest.mark.integration, pytest.mark.exclusive]

SEED = 17
# Requests per pair: about a minute of CI in all, with the stock side's.
COUNTS = {"neutron-central": 200, "neutron-region": 200, "nova-gateway": 100, "cinder-gateway": 100}


@pytest.fixture(scope="module")
def fuzz(sandbox):

    layout = sandbox_layout(sandbox.state_dir)
    if not layout.stock_neutron:
        pytest.fail(f"the sandbox in {sandbox.state_dir} has no stock Neutron; start it with --stock-neutron")
    run = targets.start(layout)
    schemas = apis.read_schemas()
    try:
        pairs = {p.name: p for p in (*targets.neutron_pairs(run, schemas), *targets.gateway_pairs(run, schemas))}
        yield pairs
    finally:
        left = targets.cleanup(run)
        if left:  # hygiene, not what is tested here: say so and go on
            print(f"the campaign's objects not all removed: {left}")


@pytest.mark.parametrize("pair_name", list(COUNTS))
def test_isthmus_adds_no_5xx(fuzz, pair_name):
    pair = fuzz[pair_name]
    result = campaign.run(pair, SEED, COUNTS[pair_name])
    print(campaign.table([result]))
    for outcome in result.stock_5xx:  # listed, not hidden: docs/fuzzing.md names the known ones
        print(f"stock 5xx #{outcome.index} {outcome.stock}: {outcome.request.show(120)}")
    assert len(result.outcomes) == COUNTS[pair_name]
    assert any(o.isthmus < 400 for o in result.outcomes), "no request succeeded: the endpoints were not reached"
    assert not result.diffs, "Isthmus answered >= 500 where stock did not:\n" + "\n".join(
        result.replay(o) for o in result.diffs)

