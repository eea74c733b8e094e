"""Address vectors, plus properties."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from isthmus.ccm.config import NetworkingOptions
from isthmus.ccm.openstack.addresses import (
    is_ipv6,
    node_addresses,
    parse_address_sort_order,
    sort_node_addresses,
    sort_priority,
)
from isthmus.ccm.openstack.model import NodeAddress, Port, Server, ServerAddress, Subport

A4 = "50.56.176.99"
A6 = "2001:4800:790e:510:be76:4eff:fe04:82a8"
V6 = "2001:4800:780e:510:be76:4eff:fe04:84a8"
HN = "a1-yinvcez57-0-bvynoyawrhcg-kube-minion-fg5i4jwcc2yy.novalocal"
PORTS = (Port("p1", "ACTIVE", ("10.0.0.32", "10.0.0.31")),)
PRIVATE = (
    ServerAddress("10.0.0.32", "fixed"),
    ServerAddress("50.56.176.36", "floating"),
    ServerAddress("10.0.0.31"),
)
PUB = (ServerAddress("50.56.176.35"), ServerAddress(V6))


def I(a: str) -> NodeAddress:  # noqa: E743 - short names keep vectors readable
    return NodeAddress("InternalIP", a)


def E(a: str) -> NodeAddress:
    return NodeAddress("ExternalIP", a)


def H(a: str) -> NodeAddress:
    return NodeAddress("Hostname", a)


def server(pub_name: str, hostname: bool = False,
           extra: Mapping[str, tuple[ServerAddress, ...]] | None = None) -> Server:
    return Server(
        id="s",
        name="n",
        access_ipv4=A4,
        access_ipv6=A6,
        metadata={"hostname": HN} if hostname else {},
        addresses={"private": PRIVATE, pub_name: PUB, **(extra or {})},
    )


def test_node_addresses() -> None:
    got = node_addresses(server("public", hostname=True), PORTS, [], NetworkingOptions(public_network_name=["public"]))
    assert got == [I("10.0.0.32"), I("10.0.0.31"), E(A4), E(A6), H(HN), E("50.56.176.36"), E("50.56.176.35"), E(V6)]


def test_custom_public_network() -> None:
    got = node_addresses(server("pub-net"), PORTS, [], NetworkingOptions(public_network_name=["pub-net"]))
    assert got == [I("10.0.0.32"), I("10.0.0.31"), E(A4), E(A6), E("50.56.176.36"), E("50.56.176.35"), E(V6)]


def test_intersecting_fixed_ip() -> None:
    srv = Server(
        id="s", name="n", access_ipv4=A4, access_ipv6=A6,
        addresses={
            "private": (ServerAddress("10.0.0.32", "fixed"), ServerAddress("10.0.0.31")),
            "pub-net": (ServerAddress("50.56.176.36"), ServerAddress(V6)),
        },
    )
    ports = (Port("p1", "ACTIVE", ("10.0.0.32", "10.0.0.31", "50.56.176.36")),)
    got = node_addresses(srv, ports, [], NetworkingOptions(public_network_name=["pub-net"]))
    assert got == [I("10.0.0.32"), I("10.0.0.31"), E(A4), E(A6), E("50.56.176.36"), E(V6)]


def test_multiple_custom_internal_networks() -> None:
    srv = server("pub-net", extra={"also-private": (ServerAddress("10.0.0.64"),)})
    got = node_addresses(srv, PORTS, [], NetworkingOptions(internal_network_name=["private", "also-private"]))
    assert got == [I("10.0.0.32"), I("10.0.0.31"), E(A4), E(A6), I("10.0.0.64"), E("50.56.176.36")]


def test_one_internal_network() -> None:
    srv = server("pub-net", extra={"also-private": (ServerAddress("10.0.0.64"),)})
    got = node_addresses(srv, PORTS, [], NetworkingOptions(internal_network_name=["also-private"]))
    assert got == [E(A4), E(A6), I("10.0.0.64"), E("50.56.176.36")]


def test_ipv6_disabled() -> None:
    opts = NetworkingOptions(public_network_name=["public"], ipv6_support_disabled=True)
    got = node_addresses(server("public"), PORTS, [], opts)
    assert got == [I("10.0.0.32"), I("10.0.0.31"), E(A4), E("50.56.176.36"), E("50.56.176.35")]


def test_address_sort_order_option() -> None:
    opts = NetworkingOptions(
        public_network_name=["public"], address_sort_order="10.0.0.0/8, 50.56.176.0/24, 2001:4800::/32"
    )
    got = node_addresses(server("public", hostname=True), PORTS, [], opts)
    assert got == [
        I("10.0.0.31"), I("10.0.0.32"),
        E("50.56.176.35"), E("50.56.176.36"), E(A4),
        E(V6), E(A6), H(HN),
    ]


def test_inactive_ports_and_subports() -> None:
    srv = Server(id="s", name="n")  # no addresses at all: subports still land
    ports = (Port("p1", "DOWN", ("10.0.0.5",), subport_ids=("sp",)),)
    subs = [Subport("vlan-net", ("192.168.5.5", "fd00::5"))]
    assert node_addresses(srv, ports, subs, NetworkingOptions()) == [I("192.168.5.5"), I("fd00::5")]
    assert node_addresses(srv, ports, subs, NetworkingOptions(ipv6_support_disabled=True)) == [I("192.168.5.5")]
    assert node_addresses(srv, [], [], NetworkingOptions()) == []


def test_subports_append_after_existing_network_entries() -> None:
    srv = Server(id="s", name="n", addresses={"net": (ServerAddress("10.1.0.1"),)})
    subs = [Subport("net", ("10.1.0.2",)), Subport("a-net", ("10.2.0.1",))]
    assert node_addresses(srv, [], subs, NetworkingOptions()) == [I("10.2.0.1"), I("10.1.0.1"), I("10.1.0.2")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("InvalidOption, AnotherInvalidOption", []),
        (
            "192.168.0.0/16, InvalidOption, AnotherInvalidOption, 2001:4800:790e::/64",
            ["192.168.0.0/16", "2001:4800:790e::/64"],
        ),
        ("10.0.0.0/244", []),
        ("10.0.0.0 ,\t192.168.0.1/24", ["192.168.0.0/24"]),  # no prefix: invalid; host bits: allowed
    ],
)
def test_parse_sort_order(text: str, expected: list[str]) -> None:
    assert [str(n) for n in parse_address_sort_order(text)] == expected


@pytest.mark.parametrize(
    ("address", "priority"),
    [
        ("", 0),
        ("some-host.exam.ple", 0),
        ("2001:4800:790e::82a8", 1),
        ("2001:cafe:babe::82a8", 0),
        ("192.168.100.200", 2),
        ("192.168.101.123", 0),
        ("::ffff:192.168.100.1", 2),  # v4-mapped counts as IPv4, as in Go
    ],
)
def test_sort_priority(address: str, priority: int) -> None:
    networks = parse_address_sort_order("192.168.100.0/24, 2001:4800:790e::/64")
    assert sort_priority(address, networks) == priority


SORT_INPUT = [
    E("2001:4800:780e:510:be76:4eff:fe04:84a8"),
    I("fd08:1374:fcee:916b:be76:4eff:fe04:84a8"),
    I("192.168.0.1"),
    I("fd08:1374:fcee:916b:be76:4eff:fe04:82a8"),
    I("10.0.0.32"),
    I("172.16.0.1"),
    E("2001:4800:790e:510:be76:4eff:fe04:82a8"),
    I("10.0.0.31"),
    I("50.56.176.37"),
    E("50.56.176.36"),
    H("a1-yinvcez57-0-bvynoyawrhcg-kube-minion-fg5i4jwcc2yy.novalocal"),
    E("50.56.176.99"),
    E("50.56.176.35"),
    H("a1-yinvcez57-0-bvynoyawrhcg-kube-minion-fg5i4jwcc2yy.exam.ple"),
]


def items(*numbers: int) -> list[NodeAddress]:
    return [SORT_INPUT[n - 1] for n in numbers]


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("10.0.0.0/244", SORT_INPUT),
        ("10.0.0.0/8", items(8, 5, 1, 2, 3, 4, 6, 7, 9, 10, 11, 12, 13, 14)),
        ("fd08:1374:fcee:916b::/64", items(4, 2, 1, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)),
        (
            "10.0.0.0/8, 172.16.0.0/16, 192.168.0.0/24, fd08:1374:fcee:916b::/64, 50.56.176.0/24, 2001:cafe:babe::/64",
            items(8, 5, 6, 3, 4, 2, 13, 10, 9, 12, 1, 7, 11, 14),
        ),
    ],
)
def test_sort_node_addresses(order: str, expected: list[NodeAddress]) -> None:
    assert sort_node_addresses(SORT_INPUT, parse_address_sort_order(order)) == expected


def test_is_ipv6() -> None:
    assert [is_ipv6(a) for a in ("10.0.0.1", "::ffff:10.0.0.1", "fd00::1", "not-an-ip")] == [False, False, True, True]


ips = st.one_of(st.ip_addresses().map(str), st.sampled_from(["host.example", ""]))
entries = st.builds(NodeAddress, st.sampled_from(["InternalIP", "ExternalIP", "Hostname"]), ips)
cidrs = st.one_of(
    st.ip_addresses(v=4).flatmap(lambda ip: st.integers(0, 32).map(lambda p: f"{ip}/{p}")),
    st.ip_addresses(v=6).flatmap(lambda ip: st.integers(0, 128).map(lambda p: f"{ip}/{p}")),
    st.text(max_size=12),
)


@given(st.lists(entries, max_size=12), st.lists(cidrs, max_size=5))
def test_sort_is_a_stable_permutation_by_priority(addresses: list[NodeAddress], order: list[str]) -> None:
    networks = parse_address_sort_order(", ".join(order))
    got = sort_node_addresses(addresses, networks)
    assert sorted(map(repr, got)) == sorted(map(repr, addresses))
    priorities = [sort_priority(a.address, networks) for a in got]
    assert priorities == sorted(priorities, reverse=True)
    # priority-0 entries keep their input order
    assert [a for a in got if sort_priority(a.address, networks) == 0] == [
        a for a in addresses if sort_priority(a.address, networks) == 0
    ]


@given(st.text(max_size=60))
def test_parse_sort_order_never_crashes(text: str) -> None:
    for network in parse_address_sort_order(text):
        assert isinstance(network, (ipaddress.IPv4Network, ipaddress.IPv6Network))


server_addresses = st.lists(
    st.builds(ServerAddress, st.ip_addresses().map(str), st.sampled_from(["", "fixed", "floating"])), max_size=4
)


@given(
    st.dictionaries(st.sampled_from(["a", "b", "pub"]), server_addresses.map(tuple), max_size=3),
    st.lists(st.ip_addresses().map(str), max_size=3),
    st.booleans(),
)
def test_node_addresses_unique_and_filtered(networks: dict, fixed: list[str], no_v6: bool) -> None:
    srv = Server(id="s", name="n", addresses=networks)
    opts = NetworkingOptions(public_network_name=["pub"], ipv6_support_disabled=no_v6)
    got = node_addresses(srv, [Port("p", "ACTIVE", tuple(fixed))], [], opts)
    assert len(got) == len(set(got))
    if no_v6:
        assert not any(is_ipv6(a.address) for a in got)
