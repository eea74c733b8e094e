"""``isthmus-operator``: run the operator (``kopf run`` on isthmus.operator.handlers).

Options are kopf's: ``--namespace NS`` (repeatable) or ``--all-namespaces``
(the default here), ``--standalone`` (no peering; one replica with strategy
Recreate, as kopf recommends), ``--liveness URL``, ``--verbose``.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from kopf import cli

    args = list(sys.argv[1:] if argv is None else argv)
    if not any(a in ("-n", "--namespace", "-A", "--all-namespaces") or a.startswith("--namespace=") for a in args):
        args.append("--all-namespaces")
    if "--standalone" not in args and "--peering" not in args:
        args.append("--standalone")
    try:
        cli.main.main(args=["run", "-m", "isthmus.operator.handlers", *args], prog_name="isthmus-operator",
                      standalone_mode=True)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
