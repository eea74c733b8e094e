"""Job types of cross-region networking and their payloads (shared by central,
which queues them, and the reconcilers, which run them)."""

from __future__ import annotations

from isthmus.jobs.models import HINTS

# Make every regional copy of a network converge on central: copies exist where
# routed, attributes and subnets match, shadow ports mirror ports bound in
# other regions, ports deleted at central are gone.
NETWORK_SYNC = "network_sync"
# Make every regional copy of a project's security groups converge on central,
# including the address groups and companion rules that admit remote-group
# members bound in other regions (full; the periodic backstop of sg_member_sync).
SECURITY_GROUP_SYNC = "security_group_sync"
# One (security group, address) pair a port event may have changed, keyed
# "<group id>#<address>/<prefix>": the address joins or leaves the group's address
# group in each region. Incremental: one address, whatever the group's size.
SG_MEMBER_SYNC = "sg_member_sync"
# One central port changed (security groups, port security, address pairs, DHCP
# options, name, ...): bring its regional copies and shadows to it. Incremental:
# touches that port only; network_sync's periodic pass is the backstop.
PORT_SYNC = "port_sync"
# One region's ports against central's record of their bindings: reports the
# local plugin could not deliver (lost on a restart) and deletes made while
# central was down. Periodic, per region.
BINDING_SYNC = "binding_sync"
# One central router, carried out in every region it reaches: a half per region
# (interfaces, routes, gateway), the transit network between halves, floating
# IPs in the external network's region. Level-triggered; periodic backstop.
ROUTER_SYNC = "router_sync"


def fresh_bind_hint(region: str) -> str:
    """port_sync's hint (docs/jobs.md, Coalescing): the event is the port's first
    binding, in ``region``, with no other change, so that region holds the port as
    the local plugin made it from central: nothing to read or write there."""
    return f"fresh_bind_in:{region}"


# The hint of a run only the periodic resync asked for (no event, no operator):
# network_sync leaves to their own port_sync the ports that have one running or
# just finished, or whose change at central has not queued it yet; binding_sync
# shares one list of central's ports among the regions' passes (docs/jobs.md,
# Coalescing).
BACKSTOP_ONLY = "backstop_only"


def port_sync_payload(network_id: str, *macs: str | None, fresh_bind_in: str | None = None) -> dict:
    """What a port_sync needs when central no longer has the port (deleted) or
    its MAC changed: where to look for the old copies; and its hint, if any."""
    payload: dict = {"network_id": network_id, "macs": sorted({m for m in macs if m})}
    if fresh_bind_in:
        payload[HINTS] = {fresh_bind_hint(fresh_bind_in): True}
    return payload
