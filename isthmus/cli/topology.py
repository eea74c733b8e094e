"""``isthmus topology serve``: the multi-region topology as a local web page.

Uses the user's own clouds.yaml credentials (``--os-cloud``, else ``OS_CLOUD``)
and binds to 127.0.0.1 unless told otherwise, the way ``kubectl proxy`` does.
See docs/topology.md.
"""

from __future__ import annotations

import argparse
import os


def register(sub: argparse._SubParsersAction) -> None:
    from isthmus.topology.collect import CENTRAL_REGION, DEFAULT_TIMEOUT
    from isthmus.topology.web import DEFAULT_INTERVAL, DEFAULT_PORT

    parser = sub.add_parser("topology", help="see the multi-region cloud: a local topology page")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    commands = parser.add_subparsers(dest="topology_command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve the topology page (and /model.json) locally",
                                description="Serve the topology page (and /model.json) locally.")
    serve.add_argument("--os-cloud", default=os.environ.get("OS_CLOUD"), metavar="CLOUD",
                       help="clouds.yaml cloud to read with (default: $OS_CLOUD)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free)")
    serve.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                       help="a Host name the page answers to besides localhost and the bind address "
                            "(repeat; needed with --bind 0.0.0.0)")
    serve.add_argument("--token", default=os.environ.get("ISTHMUS_TOPOLOGY_TOKEN"),
                       help="require this token of every request (default: $ISTHMUS_TOPOLOGY_TOKEN; "
                            "the printed URL carries it)")
    serve.add_argument("--interval", type=float, default=DEFAULT_INTERVAL,
                       help=f"seconds between refreshes of the model and of the page (default {DEFAULT_INTERVAL:g})")
    serve.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                       help=f"bound of each API call in seconds (default {DEFAULT_TIMEOUT:g})")
    serve.add_argument("--central-region", default=CENTRAL_REGION,
                       help=f"region of central Neutron and the Admin API (default {CENTRAL_REGION})")
    serve.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    from isthmus.topology import collect, web

    if args.interval <= 0 or args.timeout <= 0:
        print("error: --interval and --timeout must be > 0")
        return 2
    collector = collect.collector_for(args.os_cloud, args.central_region, args.timeout)
    access = web.Access.for_bind(args.bind, args.allow_host, args.token)
    web.serve(collector.topology, args.bind, args.port, args.interval,
              ready=lambda line: print(line, flush=True), access=access)
    return 0
