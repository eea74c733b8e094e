#!/usr/bin/env python3
"""Fault campaigns on a running sandbox (docs/faults.md).

    # A short campaign: 10 faults, seed 1, at most 30 minutes, a JSON report:
    .venv/bin/python tools/faults.py campaign --state-dir .sandbox --faults 10 --report faults.json

    # The long one the issue asks for (every kind at least twice, restores three times):
    .venv/bin/python tools/faults.py campaign --state-dir .sandbox --faults 60 --minutes 120

Steady user load (boots and deletes in every region, ports, security-group
rules) runs while faults are injected one at a time or in pairs: SIGKILL and
SIGSTOP of the Isthmus services, central and regional neutron-server and
nova-api; RabbitMQ stopped; a region cut off (nftables); a regional Neutron
restored from a backup taken minutes earlier; the Isthmus database locked.
After each fault is lifted the invariants are checked until they hold. Exit
status 1 if any did not, or a request failed in a region no fault touched.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# Services this tool restarts import the tests' job types (the test sandbox loads them).
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    from isthmus.sandbox.campaign import run

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", required=True)
    campaign = actions.add_parser("campaign", help="run a fault campaign")
    campaign.add_argument("--state-dir", default=".sandbox", type=Path)
    campaign.add_argument("--faults", type=int, default=10, help="cycles (each one fault, or a pair)")
    campaign.add_argument("--seed", type=int, default=1)
    campaign.add_argument("--minutes", type=float, default=30, help="stop starting cycles after this long")
    campaign.add_argument("--kinds", default=",".join(run.KINDS),
                          help=f"fault kinds, comma-separated (default: all of {', '.join(run.KINDS)})")
    campaign.add_argument("--hold", type=float, default=20, help="seconds each fault lasts")
    campaign.add_argument("--pairs", type=float, default=0.25, help="share of cycles with two faults at once")
    campaign.add_argument("--converge-timeout", type=float, default=240)
    campaign.add_argument("--report", type=Path, help="write the JSON report here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # SIGTERM ends the campaign as Ctrl-C does: the fault under way is lifted and
    # the campaign's network removed (their finally blocks run).
    signal.signal(signal.SIGTERM, _interrupt)
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    unknown = sorted(set(kinds) - set(run.KINDS))
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)} (known: {', '.join(run.KINDS)})")
    return campaign_main(args.state_dir, run.Settings(seed=args.seed, count=args.faults, minutes=args.minutes,
                                                      kinds=kinds, hold=args.hold, pairs=args.pairs,
                                                      converge_timeout=args.converge_timeout), args.report)


def campaign_main(state_dir: Path, settings, report_path: Path | None) -> int:
    import openstack.config

    from isthmus.sandbox.campaign import run
    from isthmus.sandbox.layout import Layout

    layout = Layout.load(state_dir)
    if layout is None:
        print(f"no sandbox in {state_dir} (start one: isthmus sandbox up)", file=sys.stderr)
        return 2
    config = openstack.config.OpenStackConfig(config_files=[str(layout.clouds_yaml)])
    connections: dict[tuple[str, str], object] = {}

    def connect(region: str, cloud: str):
        key = (region, cloud)
        if key not in connections:
            connections[key] = openstack.connection.Connection(config=config.get_one(cloud=cloud, region_name=region))
        return connections[key]

    campaign = run.Campaign(layout, settings, connect, sys.stdout)
    try:
        outcomes = campaign.run()
    except KeyboardInterrupt:
        outcomes = campaign.outcomes
        print(f"interrupted after {len(outcomes)} cycles (the fault under way was lifted)")
    data = run.report(outcomes, settings, campaign.ledger)
    data["cleanup_problems"] = campaign.cleanup_problems
    run.print_table(data["summary"], sys.stdout)
    for region, load in data["load"].items():
        print(f"load in {region}: {load['requests']} requests, {load['failed']} failed (during faults there or not)")
    print(f"violations: {data['violations']}; requests failed in unfaulted regions: {data['failed_elsewhere']}")
    if report_path:
        run.write_report(report_path, data)
        print(f"report: {report_path}")
    return 0 if data["violations"] == 0 and data["failed_elsewhere"] == 0 and len(outcomes) == settings.count else 1


if __name__ == "__main__":
    sys.exit(main())
