"""SANDBOX ONLY: an ML2 mechanism driver that binds ports without agents.

The sandbox's compute hosts run Nova's fake virt driver and no Open vSwitch agent,
so stock ML2 leaves their ports ``binding_failed`` and boots fail. This driver binds
every normal-vNIC port that names a host, as an OVS agent would, and reports it
ACTIVE. It also keeps an OVS agent row for the region's compute host (with a
made-up tunnel IP), heartbeating as the agent would, so that what reads agents
(the local plugin's binding report, shadow agents in other regions) sees what a
real region shows. It uses only neutron-lib's public MechanismDriver API and the
plugin's agents API. Never load it in a real cloud: it claims ports were wired
when nothing was wired.
"""

from __future__ import annotations

import logging
import threading
import time

from neutron_lib import constants
from neutron_lib import context as n_context
from neutron_lib.api.definitions import portbindings
from neutron_lib.callbacks import events, registry, resources
from neutron_lib.plugins import directory
from neutron_lib.plugins.ml2 import api
from oslo_config import cfg

from isthmus.network.l3_status import set_floatingip_status
from isthmus.sandbox.dataplane import wakeup

LOG = logging.getLogger(__name__)
GROUP = "isthmus_sandbox"
OPTS = [
    cfg.StrOpt("agent_host", default="", help="Compute host whose OVS agent row this driver keeps alive."),
    cfg.StrOpt("agent_tunnel_ip", default="", help="The tunnel IP that agent reports."),
    cfg.FloatOpt("agent_report_interval", default=30.0, help="Seconds between heartbeats."),
    cfg.BoolOpt("bind_ports", default=True,
                help="Bind ports (off in an ML2/OVN region: its chassis binds them; this driver then "
                     "only wakes the dataplane agent)."),
    cfg.StrOpt("dataplane_socket", default="",
               help="The region's dataplane agent's wake-up socket (--dataplane): told of every change."),
]


class SandboxBinderDriver(api.MechanismDriver):
    def initialize(self) -> None:
        cfg.CONF.register_opts(OPTS, group=GROUP)
        conf = cfg.CONF[GROUP]
        if conf.dataplane_socket:
            self._subscribe_l3()
        if conf.agent_host and conf.agent_tunnel_ip:
            threading.Thread(target=self._heartbeat, args=(conf.agent_host, conf.agent_tunnel_ip,
                                                           conf.agent_report_interval),
                             name="sandbox-agent", daemon=True).start()

    @staticmethod
    def _heartbeat(host: str, tunnel_ip: str, interval: float) -> None:
        first = True
        while True:
            time.sleep(1.0 if first else interval)
            plugin = directory.get_plugin()
            if plugin is None:
                continue  # the plugin is still loading
            try:
                plugin.create_or_update_agent(n_context.get_admin_context(), {
                    "agent_type": constants.AGENT_TYPE_OVS, "binary": "neutron-openvswitch-agent",
                    "host": host, "topic": "N/A", "start_flag": first,
                    "configurations": {"tunneling_ip": tunnel_ip, "tunnel_types": ["vxlan"],
                                       "l2_population": True, "sandbox": True},
                })
                first = False
            except Exception as err:  # noqa: BLE001 - a heartbeat retries, as an agent would
                LOG.warning("sandbox agent heartbeat for %s failed: %s", host, err)

    # --- waking the dataplane agent (what Neutron's RPC notifications do for real agents)
    def _changed(self, *args, **kwargs) -> None:
        wakeup.notify(cfg.CONF[GROUP].dataplane_socket)

    def _subscribe_l3(self) -> None:
        for resource in (resources.ROUTER, resources.ROUTER_INTERFACE, resources.ROUTER_GATEWAY,
                         resources.FLOATING_IP):
            for event in (events.AFTER_CREATE, events.AFTER_UPDATE, events.AFTER_DELETE):
                registry.subscribe(self._changed, resource, event)

    create_port_postcommit = delete_port_postcommit = _changed

    def update_port_postcommit(self, context: api.PortContext) -> None:
        if context.current.get("device_owner") == constants.DEVICE_OWNER_FLOATINGIP:
            # The dataplane agent binds a floating IP's port once it wired it
            # (the L3 agent's status report in a real region).
            wired = bool(context.host) and context.vif_type not in (portbindings.VIF_TYPE_UNBOUND,
                                                                    portbindings.VIF_TYPE_BINDING_FAILED)
            status = constants.FLOATINGIP_STATUS_ACTIVE if wired else constants.FLOATINGIP_STATUS_DOWN
            set_floatingip_status(context.plugin_context.elevated(), context.current["device_id"], status)
        self._changed()
    create_network_postcommit = update_network_postcommit = delete_network_postcommit = _changed
    create_subnet_postcommit = update_subnet_postcommit = delete_subnet_postcommit = _changed

    def bind_port(self, context: api.PortContext) -> None:
        if context.current.get(portbindings.VNIC_TYPE, portbindings.VNIC_NORMAL) != portbindings.VNIC_NORMAL:
            return
        if not context.host or not cfg.CONF[GROUP].bind_ports:
            return
        for segment in context.segments_to_bind:
            context.set_binding(
                segment[api.ID],
                portbindings.VIF_TYPE_OVS,
                {portbindings.CAP_PORT_FILTER: True, portbindings.OVS_HYBRID_PLUG: False},
                status=constants.PORT_STATUS_ACTIVE,
            )
            return
