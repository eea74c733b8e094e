#!/usr/bin/env python3
"""Differential fuzzing of Isthmus against stock OpenStack (docs/fuzzing.md).

    # A long campaign on a running sandbox (started with --stock-neutron), random seeds:
    .venv/bin/python tools/fuzz.py campaign --state-dir .sandbox --requests 10000 --report fuzz-report.json

    # One request again, as a failing test or a report names it:
    .venv/bin/python tools/fuzz.py replay --state-dir .sandbox --pair neutron-region --seed 17 --index 42

``campaign`` splits --requests over the pairs, draws one random seed per round
of --batch requests (printed, so any round can be drawn again), and writes a JSON
report: per pair the requests, 2xx/4xx/5xx of stock and of Isthmus, every diff
(stock < 500, Isthmus >= 500) with its replay command, and every 5xx the stock
service gave itself. Bounded by --requests and by --max-minutes. Exit status 1
if there is any diff.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STOP: list[bool] = []  # set by SIGTERM
sys.path.insert(0, str(REPO))


def _pairs(campaign, names: list[str], stack):
    from tests.fuzz import apis, targets

    services = tuple(s for s, wanted in (("neutron", any(n.startswith("neutron") for n in names)),
                                          ("nova", "gateway" in ",".join(names)),
                                          ("cinder", "gateway" in ",".join(names)))
                     if wanted)
    schemas = apis.read_schemas(services) if services else {}
    pairs = []
    if any(n.startswith("neutron") for n in names):
        pairs += [p for p in targets.neutron_pairs(campaign, schemas) if p.name in names]
    if "nova-gateway" in names or "cinder-gateway" in names:
        pairs += [p for p in targets.gateway_pairs(campaign, schemas) if p.name in names]
    if "admin" in names:
        pairs.append(stack.enter_context(targets.admin_pair()))
    return pairs


def _campaign(args) -> int:
    from contextlib import ExitStack

    from isthmus.sandbox.layout import Layout
    from tests.fuzz import campaign as fuzz
    from tests.fuzz import generate, targets

    layout = Layout.load(args.state_dir)
    if layout is None:
        print(f"no sandbox in {args.state_dir}", file=sys.stderr)
        return 2
    names = args.pairs.split(",")
    deadline = time.monotonic() + args.max_minutes * 60
    rng = random.Random(args.seed)
    run = targets.start(layout)
    results: list[fuzz.PairResult] = []
    try:
        with ExitStack() as stack:
            pairs = _pairs(run, names, stack)
            per_pair = args.requests // len(pairs)
            done = {pair.name: 0 for pair in pairs}
            # Round-robin, one batch per pair a turn: a campaign cut short by
            # --max-minutes has covered every pair alike.
            while time.monotonic() < deadline and not STOP and any(n < per_pair for n in done.values()):
                for pair in pairs:
                    if done[pair.name] >= per_pair or time.monotonic() >= deadline or STOP:
                        continue
                    seed = rng.randrange(2**32)
                    count = min(args.batch, per_pair - done[pair.name])
                    result = fuzz.run(pair, seed, count, generate.requests_for(pair.api, seed, count), deadline,
                                       stop=lambda: bool(STOP))
                    results.append(result)
                    done[pair.name] += len(result.outcomes)
                    print(f"{pair.name} seed {seed}: {len(result.outcomes)} requests, {len(result.diffs)} diffs, "
                          f"{len(result.stock_5xx)} stock 5xx, {result.seconds:.0f}s", flush=True)
                    for outcome in result.diffs:
                        print("  DIFF " + result.replay(outcome), flush=True)
    finally:
        left = targets.cleanup(run)
        if left:
            print("not cleaned up: " + "; ".join(left[:20]), file=sys.stderr)
    merged = _merge(results)
    print(fuzz.table(merged))
    report = {"rounds": fuzz.report(results), "totals": fuzz.report(merged)["table"]}
    Path(args.report).write_text(__import__("json").dumps(report, indent=2) + "\n")
    print(f"report: {args.report}")
    return 1 if any(r.diffs for r in results) else 0


def _merge(results):
    """One row per pair over all its rounds (seed -1: many)."""
    from tests.fuzz.campaign import PairResult

    merged: dict[str, PairResult] = {}
    for r in results:
        total = merged.setdefault(r.pair, PairResult(r.pair, r.api, -1))
        total.outcomes += r.outcomes
        total.seconds += r.seconds
    return list(merged.values())


def _replay(args) -> int:
    from contextlib import ExitStack

    from isthmus.sandbox.layout import Layout
    from tests.fuzz import generate, targets

    layout = Layout.load(args.state_dir)
    run = targets.start(layout) if layout is not None else None
    try:
        with ExitStack() as stack:
            pair = _pairs(run, [args.pair], stack)[0]
            request = _from_report(args) if args.report else \
                generate.requests_for(pair.api, args.seed, args.count)[args.index]
            print(request.show(2000))
            if pair.stock is not None:
                print(f"stock ({pair.stock.name}): {pair.stock.answer(request)}")
            print(f"isthmus ({pair.isthmus.name}): {pair.isthmus.answer(request)}")
    finally:
        if run is not None:
            targets.cleanup(run)
    return 0


def _from_report(args):
    """The diff (pair, seed, index) as a campaign's report recorded it, whole."""
    import base64
    import json

    from tests.fuzz.generate import Request

    report = json.loads(Path(args.report).read_text())
    for entry in report["rounds"]["pairs"]:
        if entry["pair"] == args.pair and entry["seed"] == args.seed:
            for req in entry.get("diff_requests", []):
                if req["index"] == args.index:
                    body = base64.b64decode(req["body_base64"]) if req["body_base64"] is not None else None
                    return Request(req["method"], req["path"], body, req["admin"], req["what"])
    raise SystemExit(f"no diff {args.pair} seed {args.seed} #{args.index} in {args.report}")


def main(argv: list[str] | None = None) -> int:
    from tests.fuzz.targets import PAIRS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    camp = sub.add_parser("campaign", help="a long campaign with random seeds, and a report")
    camp.add_argument("--state-dir", type=Path, default=REPO / ".sandbox")
    camp.add_argument("--pairs", default=",".join(PAIRS), help=f"comma-separated, of {', '.join(PAIRS)}")
    camp.add_argument("--requests", type=int, default=10_000, help="in all, split evenly over the pairs")
    camp.add_argument("--batch", type=int, default=500, help="requests per seed")
    camp.add_argument("--seed", type=int, default=None, help="seed of the seeds (default: random)")
    camp.add_argument("--max-minutes", type=float, default=120)
    camp.add_argument("--report", default="fuzz-report.json")
    camp.set_defaults(func=_campaign)
    replay = sub.add_parser("replay", help="send one generated request to both sides again")
    replay.add_argument("--state-dir", type=Path, default=REPO / ".sandbox")
    replay.add_argument("--pair", required=True, choices=PAIRS)
    replay.add_argument("--seed", type=int, required=True)
    replay.add_argument("--count", type=int, default=0, help="as many as the run drew with that seed")
    replay.add_argument("--report", help="take the request from a campaign's report instead of drawing it")
    replay.add_argument("--index", type=int, required=True)
    replay.set_defaults(func=_replay)
    args = parser.parse_args(argv)
    # SIGTERM ends a campaign after the request under way: it reports and removes what it made.
    signal.signal(signal.SIGTERM, lambda *_: STOP.append(True))
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
