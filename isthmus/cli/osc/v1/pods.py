"""``openstack multiregion pod create|list|show|delete``."""

from __future__ import annotations

from typing import Any

from osc_lib.command import command

from isthmus.cli.osc.v1.common import client, delete_each, rows, show, without_none

COLUMNS = ("pod_id", "region_name", "az_name", "pod_az_name", "dc_name")
HEADINGS = ("Pod ID", "Region Name", "AZ Name", "Pod AZ Name", "DC Name")


class CreatePod(command.ShowOne):
    """Register a region as a pod (no availability zone: the central region)."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("--region-name", metavar="<region>", required=True, help="Keystone region name")
        parser.add_argument("--availability-zone", metavar="<az>", dest="az_name",
                            help="Availability zone the region belongs to (omit for the central pod)")
        parser.add_argument("--pod-availability-zone", metavar="<az>", dest="pod_az_name",
                            help="The region's own availability zone name")
        parser.add_argument("--data-center", metavar="<dc>", dest="dc_name", help="Data center name")
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        pod = client(self).create_pod(**without_none(
            region_name=parsed_args.region_name, az_name=parsed_args.az_name,
            pod_az_name=parsed_args.pod_az_name, dc_name=parsed_args.dc_name))
        return show(pod, COLUMNS)


class ListPods(command.Lister):
    """List pods."""

    def take_action(self, parsed_args: Any) -> Any:
        return HEADINGS, rows(client(self).list_pods(), COLUMNS)


class ShowPod(command.ShowOne):
    """Show a pod."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("pod", metavar="<pod>", help="Pod ID or region name")
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        return show(client(self).find_pod(parsed_args.pod), COLUMNS)


class DeletePod(command.Command):
    """Delete pods (and their routings)."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("pods", metavar="<pod>", nargs="+", help="Pod ID(s) or region name(s)")
        return parser

    def take_action(self, parsed_args: Any) -> None:
        api = client(self)
        delete_each("pod", parsed_args.pods, lambda p: api.delete_pod(api.find_pod(p)["pod_id"]))
