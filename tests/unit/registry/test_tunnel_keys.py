import threading

import pytest

from isthmus.db import make_engine
from isthmus.registry import TunnelKeys, create_schema
from isthmus.registry.tunnel_keys import NETWORK_KEYS, PORT_KEYS, KeysExhausted, lowest_free


@pytest.fixture
def keys(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'isthmus.sqlite'}")
    create_schema(engine)
    return TunnelKeys(engine)


def test_network_keys_come_from_the_cross_deployment_range_and_stay():
    assert NETWORK_KEYS.start == 16711681 and NETWORK_KEYS.stop - 1 == 16777215
    assert PORT_KEYS.start == 1 and PORT_KEYS.stop - 1 == 32767


def test_a_resource_keeps_its_key_and_two_resources_never_share_one(keys):
    first = keys.network_key("net-a")
    assert first == NETWORK_KEYS.start
    assert keys.network_key("net-a") == first
    assert keys.network_key("net-b") == first + 1
    assert [keys.port_key("net-a", p) for p in ("p1", "p2", "p1")] == [1, 2, 1]
    # Port keys are per network: another network starts at 1 again.
    assert keys.port_key("net-b", "p9") == 1
    assert keys.port_keys("net-a") == {"p1": 1, "p2": 2}


def test_a_released_key_is_given_again_and_a_network_takes_its_ports_keys_along(keys):
    keys.port_key("net", "p1")
    keys.port_key("net", "p2")
    keys.release_port("net", "p1")
    assert keys.port_key("net", "p3") == 1
    network = keys.network_key("net")
    keys.release_network("net")
    assert keys.port_keys("net") == {}
    assert keys.network_key("other") == network


def test_concurrent_allocations_of_one_network_never_share_a_key(keys):
    found: dict[str, int] = {}

    def allocate(port_id: str) -> None:
        found[port_id] = keys.port_key("net", port_id)

    threads = [threading.Thread(target=allocate, args=(f"p{i}",)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(found.values()) == list(range(1, 13))
    assert keys.port_keys("net") == found


def test_an_exhausted_range_says_so():
    assert lowest_free([1, 2, 4], range(1, 5)) == 3
    with pytest.raises(KeysExhausted, match="1-3"):
        lowest_free([1, 2, 3], range(1, 4))
