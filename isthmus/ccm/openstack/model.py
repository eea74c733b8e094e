"""Plain records of the OpenStack objects the CCM reads.

They hold only what node lookups need, so the lookup and address logic are
pure functions over plain data and tests can build them directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

INTERNAL_IP = "InternalIP"
EXTERNAL_IP = "ExternalIP"
HOSTNAME = "Hostname"

@dataclass(frozen=True)
class ServerAddress:
    """One entry of a server's ``addresses``; ``type`` is ``OS-EXT-IPS:type``."""

    addr: str
    type: str = ""  # "fixed", "floating", or "" when Nova does not say


@dataclass(frozen=True)
class Server:
    id: str
    name: str
    status: str = "ACTIVE"
    availability_zone: str = ""
    flavor: Mapping[str, str] = field(default_factory=dict)  # "id" and/or "original_name"
    # network name -> entries, in Nova's order
    addresses: Mapping[str, tuple[ServerAddress, ...]] = field(default_factory=dict)
    access_ipv4: str = ""
    access_ipv6: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Flavor:
    id: str
    name: str


@dataclass(frozen=True)
class Port:
    id: str
    status: str = "ACTIVE"
    fixed_ips: tuple[str, ...] = ()
    network_id: str = ""
    subport_ids: tuple[str, ...] = ()  # trunk_details.sub_ports[].port_id


@dataclass(frozen=True)
class Network:
    id: str
    name: str


@dataclass(frozen=True)
class Subport:
    """A trunk subport resolved to its network's name and its fixed IPs."""

    network_name: str
    fixed_ips: tuple[str, ...]


@dataclass(frozen=True)
class NodeAddress:
    """A Kubernetes ``NodeAddress``: type is InternalIP, ExternalIP or Hostname."""

    type: str
    address: str

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "address": self.address}
