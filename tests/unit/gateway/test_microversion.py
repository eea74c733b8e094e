import pytest

from isthmus.gateway import microversion as mv

SUPPORTED = mv.Range((2, 1), (2, 90))


@pytest.mark.parametrize("headers, expected", [
    ({}, (2, 1)),
    ({"OpenStack-API-Version": "compute 2.30"}, (2, 30)),
    ({"openstack-api-version": "compute latest"}, (2, 90)),
    ({"X-OpenStack-Nova-API-Version": "2.12"}, (2, 12)),
    ({"OpenStack-API-Version": "compute 2.31", "X-OpenStack-Nova-API-Version": "2.12"}, (2, 31)),
    ({"OpenStack-API-Version": "volume 3.5, compute 2.40"}, (2, 40)),
])
def test_accepted(headers, expected):
    assert mv.requested(headers, mv.COMPUTE, SUPPORTED) == expected


@pytest.mark.parametrize("value", ["compute 9.9", "compute 2.a", "2.30", "compute 3.2", "aa 2.30",
                                   "acompute 2.30", "compute 2.30 2.31", "compute 2.91"])
def test_rejected(value):
    with pytest.raises(mv.BadVersion):
        mv.requested({"OpenStack-API-Version": value}, mv.COMPUTE, SUPPORTED)


def test_intersection_is_within_every_region():
    ranges = [mv.Range((2, 1), (2, 95)), mv.Range((2, 1), (2, 90)), mv.Range((2, 3), (2, 96))]
    assert mv.intersect(ranges) == mv.Range((2, 3), (2, 90))
    assert mv.intersect([mv.Range((2, 1), (2, 5)), mv.Range((2, 6), (2, 9))]) is None
    assert mv.intersect([]) is None


def test_headers_echo_and_forward():
    assert mv.response_headers(mv.COMPUTE, (2, 30)) == {
        "OpenStack-API-Version": "compute 2.30", "X-OpenStack-Nova-API-Version": "2.30",  # as Nova sends both
        "Vary": "OpenStack-API-Version, X-OpenStack-Nova-API-Version"}
    assert mv.response_headers(mv.VOLUME, (3, 5)) == {"OpenStack-API-Version": "volume 3.5",
                                                       "Vary": "OpenStack-API-Version"}
    assert mv.forward_headers(mv.VOLUME, (3, 5)) == {"OpenStack-API-Version": "volume 3.5"}
