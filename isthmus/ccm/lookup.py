"""One-shot node lookup for operators (``isthmus ccm lookup``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from isthmus.ccm.config import CloudConfig, load_config
from isthmus.ccm.openstack.instances import Instances, NodeRef, RegionClients


def _openstack_clients(config: CloudConfig) -> RegionClients:
    from isthmus.ccm.openstack.clients import OpenStackClients

    return OpenStackClients.from_config(config)


def lookup_node(
    cloud_config: str,
    node_name: str = "",
    provider_id: str = "",
    region_label: str = "",
    environ: Mapping[str, str] | None = None,
    make_clients: Callable[[CloudConfig], RegionClients] = _openstack_clients,
) -> dict[str, Any]:
    """Metadata of one node as the node controller would compute it."""
    config = load_config(cloud_config, environ)
    instances = Instances(make_clients(config), config.regions, config.networking, environ)
    node = NodeRef(name=node_name, provider_id=provider_id, region_label=region_label)
    return instances.instance_metadata(node).to_dict()
