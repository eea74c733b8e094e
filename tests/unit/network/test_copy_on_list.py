"""A port list by id copies missing central ports only when a copy could be in its answer."""

from isthmus.network import SHADOW_OWNER
from isthmus.network.local.plugin import copy_could_match


def test_a_list_by_id_alone_or_for_user_and_compute_owners_may_copy():
    assert copy_could_match({"id": ["p"]})
    assert copy_could_match({"id": ["p"], "device_owner": ["compute:nova"]})
    assert copy_could_match({"id": ["p"], "device_owner": [SHADOW_OWNER, ""]})  # a user's port has no owner


def test_a_list_for_shadows_or_network_ports_never_reads_central():
    assert not copy_could_match({"id": ["p"], "device_owner": [SHADOW_OWNER]})
    assert not copy_could_match({"id": ["p"], "device_owner": ["network:dhcp", "network:router_interface"]})
