"""neutron.conf and ml2_conf.ini of a central, local or plain (stock ML2) Neutron."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from isthmus.configs.ini import ServiceUser, database, keystone_authtoken, render, service_client

CENTRAL = "central"  # the Isthmus central plugin: global networks, ports, IPAM
LOCAL = "local"  # the Isthmus local plugin: one region, materialises central's objects
PLAIN = "plain"  # stock ML2, no Isthmus (benchmark and fuzz baselines)
ROLES = (CENTRAL, LOCAL, PLAIN)

CENTRAL_MECHANISM_DRIVER = "isthmus_central"
CORE_PLUGINS = {CENTRAL: "isthmus_central", LOCAL: "isthmus_local", PLAIN: "ml2"}


@dataclass(frozen=True)
class OvnValues:
    """A region whose Neutron runs ML2/OVN: its own OVN databases."""

    nb_connection: str
    sb_connection: str
    # Metadata needs neutron-ovn-metadata-agent on every chassis; off where none runs.
    metadata_enabled: bool = False
    # OVN needs 38 bytes of geneve header for its port keys (Neutron refuses less).
    geneve_max_header_size: int = 38


@dataclass(frozen=True)
class NeutronValues:
    """What differs between Neutron servers; everything else is fixed here."""

    role: str
    region: str
    central_region: str
    # keystone_authtoken of the ``neutron`` user; its region is the catalogue region.
    service_user: ServiceUser
    database_connection: str
    transport_url: str
    # The local plugin calls central as this (``isthmus``) user, in its own region.
    central_client: ServiceUser | None = None
    central_timeout: int = 30
    isthmus_database_connection: str | None = None  # central only: registry and jobs
    availability_zone: str = ""
    # Central's mechanism driver is fixed; local/plain servers bind through these.
    mechanism_drivers: str = "openvswitch"
    type_drivers: str = "flat,vlan,vxlan"
    tenant_network_types: str = "vxlan"
    extension_drivers: str = "port_security"
    vni_ranges: str = "1:99999"
    flat_networks: str = "*"
    network_vlan_ranges: str = "physnet1:100:2999"
    host: str | None = None
    state_path: str | None = None
    lock_path: str | None = None
    api_paste_config: str | None = None
    pagination_max_limit: int | None = None
    # The sandbox runs no agents and no Nova notifications: no RPC workers, no
    # DHCP notifications, no agent reports; production leaves Neutron's defaults.
    agentless: bool = False
    unlimited_quotas: bool = False
    debug: bool = False
    # ML2/OVN (mechanism driver "ovn", the ovn-router L3 plugin, geneve tenant networks).
    ovn: OvnValues | None = None
    # More ml2_conf.ini sections (the sandbox's binder agent row).
    extra_ml2_sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"neutron role {self.role!r}: expected one of {ROLES}")
        if self.role == LOCAL and self.central_client is None:
            raise ValueError("a local Neutron needs central_client (it calls central Neutron)")


def l3_plugin(values: NeutronValues) -> str:
    """Central's routers take Isthmus AZ hints (its L3 plugin); the rest run Neutron's
    (OVN's own on an ML2/OVN region: routers are OVN logical routers)."""
    if values.role == CENTRAL:
        return "isthmus_central_l3"
    return "ovn-router" if values.ovn else "router"


def mechanism_drivers(values: NeutronValues) -> str:
    """Central binds ports as the regions report them; the others bind as configured."""
    return CENTRAL_MECHANISM_DRIVER if values.role == CENTRAL else values.mechanism_drivers


def isthmus_sections(values: NeutronValues) -> dict[str, dict[str, Any]]:
    """The Isthmus plugin's own sections (none for stock ML2)."""
    if values.role == CENTRAL:
        return {"isthmus": {"region_name": values.region,
                            "database_connection": values.isthmus_database_connection}}
    if values.role == LOCAL:
        assert values.central_client is not None
        return {
            "isthmus": {"region_name": values.region, "availability_zone": values.availability_zone,
                        "central_region": values.central_region},
            "isthmus_central": {**service_client(values.central_client), "timeout": values.central_timeout},
        }
    return {}


def neutron_conf(values: NeutronValues) -> dict[str, dict[str, Any]]:
    agentless = values.agentless
    sections: dict[str, dict[str, Any]] = {
        "DEFAULT": {
            "core_plugin": CORE_PLUGINS[values.role],
            # Routers everywhere: central holds the user's, regions the halves
            # router_sync makes (docs/networking.md, "Routers").
            "service_plugins": l3_plugin(values),
            "auth_strategy": "keystone",
            "api_paste_config": values.api_paste_config,
            "rpc_workers": 0 if agentless else None,
            "rpc_state_report_workers": 0 if agentless else None,
            "dhcp_agent_notification": False if agentless else None,
            "notify_nova_on_port_status_changes": False if agentless else None,
            "notify_nova_on_port_data_changes": False if agentless else None,
            "pagination_max_limit": values.pagination_max_limit,
            "transport_url": values.transport_url,
            "host": values.host,
            "state_path": values.state_path,
            "debug": values.debug,
        },
        "database": database(values.database_connection),
        "keystone_authtoken": keystone_authtoken(values.service_user),
        "oslo_concurrency": {"lock_path": values.lock_path},
        "oslo_messaging_notifications": {"driver": "noop"},
    }
    if values.unlimited_quotas:
        sections["quotas"] = {name: -1 for name in (
            "quota_network", "quota_subnet", "quota_port", "quota_security_group",
            "quota_security_group_rule", "quota_router", "quota_floatingip")}
    if agentless:
        sections["agent"] = {"report_interval": 0}
    sections.update(isthmus_sections(values))
    return sections


def ml2_conf(values: NeutronValues) -> dict[str, dict[str, Any]]:
    return {
        "ml2": {
            "type_drivers": values.type_drivers,
            "tenant_network_types": values.tenant_network_types,
            "mechanism_drivers": mechanism_drivers(values),
            "extension_drivers": values.extension_drivers,
        },
        # Tenant VNI ranges must be disjoint: central allocates the VNIs of shared
        # networks, each region those of its own networks; copies keep central's VNI,
        # which a region's own network must never have taken (TunnelIdInUse).
        "ml2_type_vxlan": {"vni_ranges": values.vni_ranges},
        "ml2_type_flat": {"flat_networks": values.flat_networks},
        "ml2_type_vlan": {"network_vlan_ranges": values.network_vlan_ranges},
        "securitygroup": {"enable_security_group": True},
        **ovn_sections(values),
        **{name: dict(options) for name, options in values.extra_ml2_sections.items()},
    }


def ovn_sections(values: NeutronValues) -> dict[str, dict[str, Any]]:
    if values.ovn is None:
        return {}
    ovn = values.ovn
    return {
        "ml2_type_geneve": {"vni_ranges": values.vni_ranges, "max_header_size": ovn.geneve_max_header_size},
        "ovn": {"ovn_nb_connection": ovn.nb_connection, "ovn_sb_connection": ovn.sb_connection,
                "ovn_metadata_enabled": ovn.metadata_enabled},
    }


def custom_service_config(values: NeutronValues) -> str:
    """The snippet an existing Neutron (openstack-k8s-operators' NeutronAPI
    ``customServiceConfig``) needs to become an Isthmus local Neutron: the core
    plugin and the Isthmus sections. Its database, Keystone and messaging
    settings stay the deploying operator's."""
    if values.role != LOCAL:
        raise ValueError("only a local Neutron is patched into an existing control plane")
    return render({"DEFAULT": {"core_plugin": CORE_PLUGINS[LOCAL]}, **isthmus_sections(values)})
