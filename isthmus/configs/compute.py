"""Config sections of a region's Nova and Cinder API services.

The sandbox adds its one-machine tuning (a fake compute driver, no-disk volume
backend, unlimited quotas, local paths) on top of these; the operator renders
them as they are. What both need to serve a region behind Isthmus lives here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from isthmus.configs.ini import MutableSections as Sections
from isthmus.configs.ini import ServiceUser, database, keystone_authtoken, password_auth, service_client


@dataclass(frozen=True)
class NovaValues:
    transport_url: str
    database_connection: str
    api_database_connection: str
    # The ``nova`` service user in this region; the placement and neutron clients use
    # their own service users with the same password.
    service_user: ServiceUser
    availability_zone: str | None = None
    state_path: str = "/var/lib/nova"
    lock_path: str = "/var/lib/nova/lock"
    debug: bool = False


def _as(user: ServiceUser, username: str) -> ServiceUser:
    return replace(user, username=username)


def nova_conf(values: NovaValues) -> Sections:
    user = values.service_user
    return {
        "DEFAULT": {"transport_url": values.transport_url, "state_path": values.state_path,
                    "default_availability_zone": values.availability_zone, "debug": values.debug},
        "api": {"auth_strategy": "keystone"},
        "api_database": {"connection": values.api_database_connection},
        "database": database(values.database_connection),
        "keystone_authtoken": keystone_authtoken(user),
        # Nova passes the user's token plus its own to Neutron/Cinder (long operations
        # outlive the user's token otherwise).
        "service_user": {"send_service_user_token": True, **password_auth(user)},
        "placement": service_client(_as(user, "placement")),
        "neutron": service_client(_as(user, "neutron")),
        # The region's own image and volume services, never another region's.
        "glance": {"region_name": user.region, "valid_interfaces": "internal,public"},
        "cinder": {"os_region_name": user.region},
        "oslo_concurrency": {"lock_path": values.lock_path},
        "oslo_messaging_notifications": {"driver": "noop"},
    }


@dataclass(frozen=True)
class CinderValues:
    transport_url: str
    database_connection: str
    # The ``cinder`` service user in this region; the nova client uses ``nova``'s.
    service_user: ServiceUser
    availability_zone: str | None = None
    # Which of Nova's interfaces Cinder calls (volume attach callbacks).
    nova_interface: str = "internal"
    state_path: str = "/var/lib/cinder"
    lock_path: str = "/var/lib/cinder/lock"
    debug: bool = False


def cinder_conf(values: CinderValues) -> Sections:
    user = values.service_user
    zone = values.availability_zone
    return {
        "DEFAULT": {"transport_url": values.transport_url, "auth_strategy": "keystone",
                    "state_path": values.state_path, "storage_availability_zone": zone,
                    "default_availability_zone": zone, "debug": values.debug},
        "database": database(values.database_connection),
        "keystone_authtoken": keystone_authtoken(user),
        "nova": {**service_client(_as(user, "nova")), "interface": values.nova_interface},
        "oslo_concurrency": {"lock_path": values.lock_path},
        "oslo_messaging_notifications": {"driver": "noop"},
    }
