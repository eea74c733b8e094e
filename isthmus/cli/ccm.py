"""``isthmus ccm ...``: operator tools of the multi-region cloud controller manager."""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("ccm", help="multi-region cloud controller manager tools")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    tools = parser.add_subparsers(dest="ccm_command", metavar="COMMAND")

    lookup = tools.add_parser(
        "lookup",
        help="find a node's server across regions and print its metadata as JSON",
        description="Look a node up as the node controller would (OS_CCM_REGIONAL applies) and print "
        "{providerID, instanceType, zone, region, addresses}; on failure print one line and exit 1.",
    )
    lookup.add_argument("--cloud-config", required=True, metavar="FILE", help="OCCM cloud.conf")
    who = lookup.add_mutually_exclusive_group(required=True)
    who.add_argument("--node-name", metavar="N", help="search by server name (no providerID yet)")
    who.add_argument("--provider-id", metavar="P", help="openstack://[REGION]/ID, or /ID")
    lookup.add_argument("--region-label", default="", metavar="R", help="topology.kubernetes.io/region to try first")
    lookup.set_defaults(func=run_lookup)


def run_lookup(args: argparse.Namespace) -> int:
    # Imported here so `isthmus --help` does not load openstacksdk.
    from isthmus.ccm.lookup import lookup_node

    try:
        metadata = lookup_node(args.cloud_config, args.node_name or "", args.provider_id or "", args.region_label)
    except Exception as exc:  # noqa: BLE001 - the contract is one line, whatever failed
        print(f"error: {' '.join(str(exc).split()) or type(exc).__name__}", file=sys.stderr)
        return 1
    print(json.dumps(metadata, indent=2))
    return 0
