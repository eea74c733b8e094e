"""``isthmus sandbox ...``: a real multi-region OpenStack on this machine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("sandbox", help="run a real multi-region OpenStack on this machine")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--state-dir", type=Path, default=Path(".sandbox"),
                       help="where configs, databases, logs and pids live (default ./.sandbox)")

    up = actions.add_parser("up", help="start the sandbox (reports status if it already runs)")
    common(up)
    up.add_argument("--base-port", type=int, default=21000, help="first of the sandbox's ports (default 21000)")
    up.add_argument("--regions", default="RegionOne,RegionTwo", help="comma-separated compute regions")
    up.add_argument("--no-compute", action="store_true", help="Keystone and Neutron only (fast)")
    up.add_argument("--no-volume", action="store_true",
                    help="no Cinder in the regions and no volume API at the gateway (lighter; compute stays)")
    up.add_argument("--plain", action="store_true",
                    help="stock ML2 in every Neutron, no Isthmus plugins or job worker (a baseline)")
    up.add_argument("--neutron-page-limit", type=int, default=0, metavar="N",
                    help="pagination_max_limit of every Neutron (default 0: unlimited); a small one shows "
                         "that every client pages to the end")
    up.add_argument("--dataplane", action="store_true",
                    help="make every server a real network endpoint (a namespace per server, VXLAN between "
                         "regions, wired from Neutron's API); needs root (CAP_NET_ADMIN)")
    up.add_argument("--ovn", action="store_true",
                    help="every region's Neutron runs ML2/OVN with its own OVN (NB, SB, northd) and an Open "
                         "vSwitch (userspace datapath) + ovn-controller chassis; implies --dataplane; needs the "
                         "OVN root (tools/ovn-root.sh, docs/ovn.md)")
    up.add_argument("--ovn-regions", metavar="R1,R2",
                    help="as --ovn, for these regions only (the others keep the sandbox binder: a mixed cloud)")
    up.add_argument("--octavia", action="store_true",
                    help="Octavia per region (API and worker; amphora provider with no-op drivers: "
                         "load balancers reach ACTIVE without VMs), catalogued as load-balancer")
    up.add_argument("--tls", action="store_true",
                    help="the gateway and the Admin API serve https with a private CA (state dir tls/ca.pem, "
                         "named in clouds.yaml as cacert)")
    up.add_argument("--stock-neutron", action="store_true",
                    help="one more neutron-server, stock ML2 and in no catalogue, at base port + 4: "
                         "the baseline of the differential fuzz tests (docs/fuzzing.md)")
    up.add_argument("--xjob-workers", type=int, default=1, metavar="N",
                    help="isthmus-xjob processes sharing the job database (default 1, at most 4); each job "
                         "runs in one of them")
    up.add_argument("--no-schema-cache", action="store_true",
                    help="migrate every service's database instead of loading the schemas kept from an earlier "
                         "start (~/.cache/isthmus/sandbox-schemas; also ISTHMUS_NO_SCHEMA_CACHE=1)")
    up.add_argument("--db-url", help="a MariaDB/MySQL server for the databases that are not on SQLite (Nova, "
                                     "Placement, Cinder, Octavia; Neutron with --neutron-db mariadb) "
                                     "(mysql+pymysql://user:pass@host:port/) instead of a private one")
    up.add_argument("--neutron-db", choices=("sqlite", "mariadb"), default="sqlite",
                    help="where every Neutron keeps its database (default sqlite; an OVN region's is always on "
                         "MariaDB). mariadb runs them as production regions do: concurrent writers instead of "
                         "SQLite's one at a time")
    up.set_defaults(func=_up)

    down = actions.add_parser("down", help="stop every process the sandbox started")
    common(down)
    down.set_defaults(func=_down)

    status = actions.add_parser("status", help="health of each service")
    common(status)
    status.set_defaults(func=_status)

    logs = actions.add_parser("logs", help="show a service's log")
    common(logs)
    logs.add_argument("service", help="e.g. keystone, neutron-RegionOne, nova-compute-RegionTwo")
    logs.add_argument("-n", "--lines", type=int, default=50, help="last N lines (0: all)")
    logs.add_argument("-f", "--follow", action="store_true")
    logs.set_defaults(func=_logs)

    for verb, helptext in (("stop", "stop one service (e.g. a region's Neutron, to see an outage)"),
                           ("restart", "start one service again (after code or config changes, or stop)")):
        one = actions.add_parser(verb, help=helptext)
        common(one)
        one.add_argument("service", help="e.g. neutron-RegionTwo, isthmus-xjob, nova-api-RegionOne")
        one.set_defaults(func=_stop if verb == "stop" else _restart)

    run = actions.add_parser("exec", help="run a command inside a server's network namespace (--dataplane), "
                                          "or with --outside in an external network's upstream router")
    common(run)
    run.add_argument("--outside", metavar="NETWORK",
                     help="run in the outside namespace of this external network (name or id) instead of a server")
    run.add_argument("server", nargs="?", help="server name or id, in any region (not with --outside)")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS... (e.g. -- ping -c 1 10.0.0.5)")
    run.set_defaults(func=_exec)

    tour = actions.add_parser("tour", help="a short scripted tour of a running sandbox")
    common(tour)
    tour.add_argument("--keep", action="store_true", help="leave the tour's resources in place")
    tour.set_defaults(func=_tour)


def _fail(message: str) -> int:
    print(f"isthmus sandbox: {message}", file=sys.stderr)
    return 1


def _guarded(fn):
    def wrapper(args):
        from isthmus.sandbox.process import SandboxError

        try:
            return fn(args)
        except (SandboxError, ValueError) as err:
            return _fail(str(err))
    return wrapper


def _loaded(args):
    from isthmus.sandbox.layout import Layout

    layout = Layout.load(args.state_dir)
    if layout is None:
        raise ValueError(f"no sandbox in {args.state_dir.resolve()} "
                         f"(run: isthmus sandbox up --state-dir {args.state_dir})")
    return layout


@_guarded
def _up(args) -> int:
    from isthmus.sandbox import control
    from isthmus.sandbox.layout import Layout, parse_regions

    if args.db_url and not args.db_url.startswith(("mysql+pymysql://", "mysql://")):
        raise ValueError("--db-url: must name a MariaDB/MySQL server here (mysql+pymysql://...)")
    regions = parse_regions(args.regions)
    ovn_regions = regions if args.ovn else parse_regions(args.ovn_regions) if args.ovn_regions else ()
    layout = Layout(state_dir=args.state_dir, base_port=args.base_port, regions=regions,
                    compute=not args.no_compute, db_url=args.db_url, plain=args.plain,
                    neutron_page_limit=args.neutron_page_limit, dataplane=args.dataplane or bool(ovn_regions),
                    stock_neutron=args.stock_neutron, octavia=args.octavia, tls=args.tls, ovn_regions=ovn_regions,
                    xjob_workers=args.xjob_workers, volume=not args.no_volume,
                    neutron_mariadb=args.neutron_db == "mariadb")
    return control.up(layout, schema_cache=not args.no_schema_cache)


@_guarded
def _down(args) -> int:
    from isthmus.sandbox import control

    return control.down(_loaded(args))


@_guarded
def _status(args) -> int:
    from isthmus.sandbox import control

    layout = _loaded(args)
    rows = control.status(layout)
    control.print_table(rows, sys.stdout)
    return 0 if rows and all(r.healthy for r in rows) else 3


@_guarded
def _logs(args) -> int:
    from isthmus.sandbox import control

    return control.logs(_loaded(args), args.service, args.lines, args.follow)


@_guarded
def _stop(args) -> int:
    from isthmus.sandbox import control

    return control.stop_service(_loaded(args), args.service)


@_guarded
def _restart(args) -> int:
    from isthmus.sandbox import control

    return control.restart_service(_loaded(args), args.service)


@_guarded
def _exec(args) -> int:
    from isthmus.sandbox.dataplane import host as dataplane

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.outside and args.server:  # no server with --outside: what argparse took for one starts the command
        command = [args.server, *command] if args.server != "--" else command
    if not command:
        raise ValueError("exec: give a command after --, e.g. isthmus sandbox exec vm1 -- ip addr")
    layout = _loaded(args)
    if args.outside:
        return dataplane.exec_in(dataplane.outside_namespace(layout, args.outside), command)
    if not args.server:
        raise ValueError("exec: name a server, or --outside NETWORK")
    namespace = dataplane.server_namespace(layout, dataplane.resolve_server(layout, args.server))
    return dataplane.exec_in(namespace, command)


@_guarded
def _tour(args) -> int:
    from isthmus.sandbox import tour

    return tour.run(_loaded(args), keep=args.keep)
