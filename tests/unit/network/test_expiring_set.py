"""The local plugin's memory of region-only networks forgets (one 404 is not forever)."""

from isthmus.network.local.plugin import ExpiringSet


def test_members_are_forgotten_after_the_ttl():
    now = [0.0]
    seen = ExpiringSet(60, clock=lambda: now[0])
    seen.add("net")
    assert "net" in seen and "other" not in seen
    now[0] = 59.0
    assert "net" in seen
    now[0] = 61.0
    assert "net" not in seen
