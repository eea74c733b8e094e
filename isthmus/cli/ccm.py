"""``isthmus ccm ...``: operator tools of the multi-region cloud controller manager."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("ccm", help="multi-region cloud controller manager tools")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
