"""``openstack multiregion routing create|list|show|update|delete``."""

from __future__ import annotations

from typing import Any

from osc_lib.command import command

from isthmus.cli.osc.v1.common import client, delete_each, rows, show, without_none

COLUMNS = ("id", "top_id", "bottom_id", "pod_id", "project_id", "resource_type", "created_at", "updated_at")
LIST_COLUMNS = ("id", "top_id", "bottom_id", "pod_id", "project_id", "resource_type")
LIST_HEADINGS = ("ID", "Top ID", "Bottom ID", "Pod ID", "Project ID", "Resource Type")
FIELDS = ("top_id", "bottom_id", "pod_id", "project_id", "resource_type")


def _field_options(parser: Any, required: bool) -> None:
    parser.add_argument("--top-id", metavar="<id>", required=required, help="Central resource ID")
    parser.add_argument("--bottom-id", metavar="<id>", required=required, help="ID of the copy in the pod's region")
    parser.add_argument("--pod-id", metavar="<pod>", required=required, help="Pod ID or region name")
    parser.add_argument("--project-id", metavar="<project>", required=required, help="Project owning the resource")
    parser.add_argument("--resource-type", metavar="<type>", required=required,
                        help="network, subnet, port, security_group, router, ...")


def _values(api: Any, parsed_args: Any) -> dict[str, Any]:
    values = without_none(**{f: getattr(parsed_args, f) for f in FIELDS})
    if "pod_id" in values:
        values["pod_id"] = api.find_pod(values["pod_id"])["pod_id"]
    return values


class CreateRouting(command.ShowOne):
    """Record where a central resource has a copy."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        _field_options(parser, required=True)
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        api = client(self)
        return show(api.create_routing(**_values(api, parsed_args)), COLUMNS)


class ListRoutings(command.Lister):
    """List routings, newest first (every page unless --limit)."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        _field_options(parser, required=False)
        parser.add_argument("--limit", metavar="<n>", type=int, help="One page of at most <n> routings")
        parser.add_argument("--marker", metavar="<id>", type=int, help="Start after routing <id>")
        parser.add_argument("--long", action="store_true", help="Also show timestamps")
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        api = client(self)
        found = api.list_routings(_values(api, parsed_args), limit=parsed_args.limit, marker=parsed_args.marker)
        if parsed_args.long:
            return COLUMNS, rows(found, COLUMNS)
        return LIST_HEADINGS, rows(found, LIST_COLUMNS)


class ShowRouting(command.ShowOne):
    """Show a routing."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("routing", metavar="<id>", help="Routing ID")
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        return show(client(self).get_routing(parsed_args.routing), COLUMNS)


class UpdateRouting(command.ShowOne):
    """Change a routing (routings that Isthmus wrote itself are best left alone)."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("routing", metavar="<id>", help="Routing ID")
        _field_options(parser, required=False)
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        api = client(self)
        return show(api.update_routing(parsed_args.routing, **_values(api, parsed_args)), COLUMNS)


class DeleteRouting(command.Command):
    """Delete routings."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("routings", metavar="<id>", nargs="+", help="Routing ID(s)")
        return parser

    def take_action(self, parsed_args: Any) -> None:
        delete_each("routing", parsed_args.routings, client(self).delete_routing)
