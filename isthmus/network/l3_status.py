"""Setting a floating IP's status from code running inside neutron-server.

No REST call may set a status: an L3 agent reports it over RPC, and the RPC
handler calls the L3 plugin's ``update_floatingip_status`` (a plugin method
since the first L3 agents, kept for them across releases). Central runs no L3
agent, and the sandbox's regions have none either; both call that one method.
"""

from __future__ import annotations

import logging

from neutron_lib.plugins import constants as plugin_constants
from neutron_lib.plugins import directory

LOG = logging.getLogger(__name__)


def set_floatingip_status(admin_context, fip_id: str, status: str) -> None:
    """Write the status column of one floating IP (no events follow)."""
    l3 = directory.get_plugin(plugin_constants.L3)
    if l3 is None:
        return
    try:
        l3.update_floatingip_status(admin_context, fip_id, status)
    except Exception:  # noqa: BLE001 - deleted meanwhile: nothing to show
        LOG.debug("floating IP %s: status not set", fip_id, exc_info=True)
