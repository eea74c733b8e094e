"""The ``isthmus`` command: one sub-command per component.

Each component's CLI lives in ``isthmus/cli/<component>.py`` and exposes
``register(subparsers)``; it imports its component lazily so ``isthmus --help``
stays fast and a component's heavy dependencies load only when used.
"""

from __future__ import annotations

import argparse
import logging
import sys

from isthmus import __version__
from isthmus.cli import ccm, db, operator, sandbox, topology

COMPONENTS = (sandbox, db, ccm, operator, topology)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="isthmus", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"isthmus {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="component", required=True, metavar="COMPONENT")
    for component in COMPONENTS:
        component.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
