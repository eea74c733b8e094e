"""Which central port a regional create naming its address may take."""

from __future__ import annotations

import pytest

from isthmus.network.copies import reusable_by

MINE = "p-mine"


def _port(**changes):
    port = {"project_id": MINE, "device_owner": "", "device_id": "", "binding:host_id": ""}
    port.update(changes)
    return port


def test_the_callers_free_port_is_reused():
    assert reusable_by(_port(), MINE)


@pytest.mark.parametrize("changes", [
    {"project_id": "p-other"},                                      # another project's port
    {"device_owner": "network:dhcp", "device_id": "reserved_dhcp_port"},  # central's DHCP reservation
    {"device_owner": "network:router_interface"},
    {"device_id": "a-server", "device_owner": "compute:nova"},     # in use by a server
    {"binding:host_id": "regionone-compute"},                      # bound somewhere
])
def test_any_other_port_is_not(changes):
    assert not reusable_by(_port(**changes), MINE)
