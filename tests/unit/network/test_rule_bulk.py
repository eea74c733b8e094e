"""Rule sync creates rules in bulk, one by one only for a refused chunk."""

from typing import cast

import pytest

from isthmus.clients import NeutronClient, Rejected
from isthmus.network.reconcilers import sg_members


class _Region:
    """Bulk semantics of Neutron: all rules of a POST, or none."""

    def __init__(self, existing=()):
        self.rules = set(existing)
        self.bulk_posts = 0
        self.single_posts = 0

    def create_many(self, collection, objs):
        self.bulk_posts += 1
        if any(o["id"] in self.rules for o in objs):
            raise Rejected(409, "rule exists")
        self.rules |= {o["id"] for o in objs}
        return objs

    def create(self, collection, obj):
        self.single_posts += 1
        if obj["id"] in self.rules:
            raise Rejected(409, "rule exists")
        self.rules.add(obj["id"])
        return obj


def as_client(fake: _Region) -> NeutronClient:
    """create_rules calls only create_many() and create(), which the fake answers."""
    return cast(NeutronClient, fake)


def test_hundreds_of_rules_take_a_few_bulk_posts():
    region = _Region()
    sg_members.create_rules(as_client(region), [{"id": i} for i in range(250)])
    assert region.rules == set(range(250)) and (region.bulk_posts, region.single_posts) == (3, 0)


def test_a_chunk_with_an_existing_rule_goes_one_by_one():
    region = _Region(existing={5})
    sg_members.create_rules(as_client(region), [{"id": i} for i in range(120)])
    assert region.rules == set(range(120))
    assert region.single_posts == 100  # only the refused first chunk


def test_other_refusals_are_raised():
    class Broken(_Region):
        def create_many(self, collection, objs):
            raise Rejected(400, "bad rule")
    with pytest.raises(Rejected):
        sg_members.create_rules(as_client(Broken()), [{"id": 1}])
