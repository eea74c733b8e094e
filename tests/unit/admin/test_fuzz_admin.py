"""The Admin API under the differential fuzz tier's requests (docs/fuzzing.md).

It has no stock counterpart: its baseline is its own spec, so no request may get
a 5xx. In-process (tests.fuzz.targets.admin_pair), seeded and bounded."""

from __future__ import annotations

import json

from tests.fuzz import apis, campaign, generate, targets

SEED = 17
COUNT = 1000


def test_admin_api_answers_no_request_with_a_5xx():
    with targets.admin_pair() as pair:
        result = campaign.run(pair, SEED, COUNT)
    assert len(result.outcomes) == COUNT
    classes = result.classes("isthmus")
    assert classes["2xx"] and classes["4xx"], classes  # both kinds were reached
    assert not result.diffs, "5xx from the Admin API:\n" + "\n".join(result.replay(o) for o in result.diffs)


def test_generation_is_fixed_by_the_seed():
    api = apis.admin_api()
    assert generate.requests_for(api, SEED, 50) == generate.requests_for(api, SEED, 50)
    assert generate.requests_for(api, SEED, 50) != generate.requests_for(api, SEED + 1, 50)


def test_generated_requests_cover_the_mutations_and_every_method():
    requests = generate.requests_for(apis.admin_api(), SEED, COUNT)
    kinds = " ".join(r.what for r in requests)
    for mutation in ("wrong type", "dropped", "unknown field", "boundary number", "odd string", "malformed JSON",
                     "deep", "-char string"):
        assert mutation in kinds, mutation
    assert {r.method for r in requests} == set(generate.METHODS)


def test_deep_bodies_are_deeper_than_pythons_parser_goes():
    requests = generate.requests_for(apis.admin_api(), SEED, 400)
    deep = [r for r in requests if r.what.startswith("nested 5000") or r.what.startswith("nested 50000")]
    assert deep
    body = deep[0].body
    assert body is not None
    try:
        json.loads(body)
    except RecursionError:
        pass
    else:
        raise AssertionError("a 'deep' body that Python parses is not deep enough to test anything")
