"""``openstack multiregion job create|list|show|delete|redo|schemas``."""

from __future__ import annotations

from typing import Any

from osc_lib.cli import parseractions
from osc_lib.command import command

from isthmus.cli.osc.v1.common import client, delete_each, rows, show, without_none

COLUMNS = ("id", "type", "status", "project_id", "resource", "resource_id", "attempt", "failures", "last_error",
           "run_after", "created_at", "updated_at", "started_at", "finished_at")
LIST_COLUMNS = ("id", "type", "status", "project_id", "resource", "timestamp")
LIST_HEADINGS = ("ID", "Type", "Status", "Project ID", "Resource", "Timestamp")
LONG_COLUMNS = ("id", "type", "status", "project_id", "resource", "attempt", "failures", "last_error", "updated_at")
LONG_HEADINGS = ("ID", "Type", "Status", "Project ID", "Resource", "Attempt", "Failures", "Last Error", "Updated At")


class CreateJob(command.ShowOne):
    """Queue a job (see 'openstack multiregion job schemas' for each type's resource keys)."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("--type", metavar="<type>", required=True, help="Job type")
        parser.add_argument("--project-id", metavar="<project>", required=True, help="Project of the resource")
        parser.add_argument("--resource", metavar="<key=value>", action=parseractions.KeyValueAction,
                            default={}, help="A resource key of the type, e.g. --resource network_id=N "
                            "(repeat for each key)")
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        job = client(self).create_job(parsed_args.type, parsed_args.project_id, parsed_args.resource)
        return show(job, COLUMNS)


class ListJobs(command.Lister):
    """List jobs, newest first (every page unless --limit)."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("--type", metavar="<type>", help="Only jobs of this type")
        parser.add_argument("--status", metavar="<status>", help="NEW, RUNNING, SUCCESS or FAIL (any case)")
        parser.add_argument("--project-id", metavar="<project>", help="Only jobs of this project")
        parser.add_argument("--resource-id", metavar="<id>", help="Only jobs of this (joined) resource id")
        parser.add_argument("--limit", metavar="<n>", type=int, help="One page of at most <n> jobs")
        parser.add_argument("--marker", metavar="<job>", help="Start after job <job>")
        parser.add_argument("--long", action="store_true", help="Attempts, failures and the last error too")
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        filters = without_none(type=parsed_args.type, status=parsed_args.status,
                               project_id=parsed_args.project_id, resource_id=parsed_args.resource_id)
        found = client(self).list_jobs(filters, limit=parsed_args.limit, marker=parsed_args.marker,
                                       detail=parsed_args.long)
        if parsed_args.long:
            return LONG_HEADINGS, rows(found, LONG_COLUMNS)
        return LIST_HEADINGS, rows(found, LIST_COLUMNS)


class ShowJob(command.ShowOne):
    """Show a job."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("job", metavar="<job>", help="Job ID")
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        return show(client(self).get_job(parsed_args.job), COLUMNS)


class DeleteJob(command.Command):
    """Delete jobs that are not running."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("jobs", metavar="<job>", nargs="+", help="Job ID(s)")
        return parser

    def take_action(self, parsed_args: Any) -> None:
        delete_each("job", parsed_args.jobs, client(self).delete_job)


class RedoJob(command.ShowOne):
    """Run a failed (or waiting) job again now."""

    def get_parser(self, prog_name: str) -> Any:
        parser = super().get_parser(prog_name)
        parser.add_argument("job", metavar="<job>", help="Job ID")
        return parser

    def take_action(self, parsed_args: Any) -> Any:
        return show(client(self).redo_job(parsed_args.job), COLUMNS)


class ListJobSchemas(command.Lister):
    """List job types and the resource keys each one takes."""

    def take_action(self, parsed_args: Any) -> Any:
        schemas = client(self).job_schemas()
        return ("Type", "Resource Keys"), ((s["type"], ", ".join(s["resource"])) for s in schemas)
