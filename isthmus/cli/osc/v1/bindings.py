"""``openstack multiregion binding create|list|show|delete``: which regional pod the
gateway places a project's new servers and volumes in when the request names no region."""

from __future__ import annotations

from typing import Any

from osc_lib.command import command

from isthmus.cli.osc.v1.common import client, delete_each, rows, show, without_none

COLUMNS = ("id", "project_id", "pod_id", "created_at")
HEADINGS = ("ID", "Project ID", "Pod ID", "Created At")


class CreateBinding(command.ShowOne):
    """Bind a project to a regional pod."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("--project", metavar="<project>", required=True, help="Project ID")
        parser.add_argument("--pod", metavar="<pod>", required=True, help="Pod ID or region name")
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        api = client(self)
        pod_id = api.find_pod(parsed_args.pod)["pod_id"]
        return show(api.create_binding(parsed_args.project, pod_id), COLUMNS)


class ListBindings(command.Lister):
    """List bindings, oldest first: the order the gateway tries them (every page unless --limit)."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("--project", metavar="<project>", help="Only this project's bindings")
        parser.add_argument("--pod", metavar="<pod>", help="Only bindings to this pod (ID or region name)")
        parser.add_argument("--limit", metavar="<n>", type=int, help="One page of at most <n> bindings")
        parser.add_argument("--marker", metavar="<id>", type=int, help="Start after binding <id>")
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        api = client(self)
        pod_id = api.find_pod(parsed_args.pod)["pod_id"] if parsed_args.pod else None
        found = api.list_bindings(without_none(project_id=parsed_args.project, pod_id=pod_id),
                                  limit=parsed_args.limit, marker=parsed_args.marker)
        return HEADINGS, rows(found, COLUMNS)


class ShowBinding(command.ShowOne):
    """Show a binding."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("binding", metavar="<id>", help="Binding ID")
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        return show(client(self).get_binding(parsed_args.binding), COLUMNS)


class DeleteBinding(command.Command):
    """Delete bindings (the project's next placement without a region binds again)."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("bindings", metavar="<id>", nargs="+", help="Binding ID(s)")
        return parser

    def take_action(self, parsed_args: Any) -> None:
        delete_each("binding", parsed_args.bindings, client(self).delete_binding)
