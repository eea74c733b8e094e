"""``openstack multiregion topology [--network N] [-f table|json|yaml|dot]``.

Reads the topology model (isthmus/topology) with the OSC session: central
Neutron, every region's Neutron and Nova, and the Admin API. Its own
``-f/--format`` (not cliff's formatters): the model is a tree, not one table,
and ``dot`` renders the whole of it for reports.
"""

from __future__ import annotations

import sys
from typing import Any

from osc_lib import exceptions
from osc_lib.command import command

from isthmus.topology import collect, formats, model


class ShowTopology(command.Command):
    """Show where every piece of each central network lives: copies per region with their
    segment, servers where bound and their shadows, router halves, region health, jobs."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("--network", metavar="<network>", help="Only this central network (name or ID)")
        parser.add_argument("-f", "--format", dest="topology_format", choices=formats.FORMATS, default="table",
                            help="Output format (default: table; dot is Graphviz)")
        parser.add_argument("--raw", action="store_true",
                            help="json/yaml: include the API answers behind every item")
        parser.add_argument("--central-region", metavar="<region>", default=collect.CENTRAL_REGION,
                            help=f"Region of central Neutron and the Admin API (default: {collect.CENTRAL_REGION})")
        parser.add_argument("--timeout", metavar="<seconds>", type=float, default=collect.DEFAULT_TIMEOUT,
                            help="Bound of each API call; a region slower than this is shown unhealthy")
        return parser

    def take_action(self, parsed_args: Any) -> int:
        manager = self.app.client_manager
        collector = collect.Collector(manager.session, parsed_args.central_region,
                                      getattr(manager, "interface", None) or "public", parsed_args.timeout)
        topology = collector.topology()
        if parsed_args.network:
            try:
                topology = model.only_network(topology, parsed_args.network)
            except LookupError as err:
                raise exceptions.CommandError(str(err)) from err
        out = getattr(self.app, "stdout", None) or sys.stdout
        out.write(formats.render(topology, parsed_args.topology_format, raw=parsed_args.raw))
        return 0
