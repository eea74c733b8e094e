"""copies.addresses_from_mac: the one rule both plugins follow for IPv6 subnets
whose addresses derive from the MAC (kept free of Neutron imports, so checked
against neutron_lib's names here)."""

from __future__ import annotations

import pytest
from neutron_lib import constants

from isthmus.network import copies


def test_the_modes_are_neutrons():
    assert copies.MAC_DERIVED_MODES == (constants.IPV6_SLAAC, constants.DHCPV6_STATELESS)


@pytest.mark.parametrize(("mode", "derived"), [
    ("slaac", True), ("dhcpv6-stateless", True), ("dhcpv6-stateful", False), (None, False)])
def test_only_slaac_and_stateless_dhcpv6_derive_addresses_from_the_mac(mode, derived):
    assert copies.addresses_from_mac({"ip_version": 6, "ipv6_address_mode": mode}) is derived
