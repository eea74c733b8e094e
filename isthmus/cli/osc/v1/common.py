"""Helpers shared by the multiregion commands."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from osc_lib import exceptions, utils
from osc_lib.cli import format_columns

LOG = logging.getLogger(__name__)

FORMATTERS = {"resource": format_columns.DictColumn, "payload": format_columns.DictColumn}


def client(command: Any) -> Any:
    return command.app.client_manager.multiregion


def show(item: Mapping[str, Any], columns: Sequence[str] | None = None) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    columns = tuple(columns or sorted(item))
    # osc_lib only reads the item, but annotates it as a dict.
    return columns, utils.get_dict_properties(dict(item), columns, formatters=FORMATTERS)


def rows(items: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> Iterable[tuple[Any, ...]]:
    return (utils.get_dict_properties(dict(item), columns, formatters=FORMATTERS) for item in items)


def delete_each(what: str, ids: Sequence[str], delete: Callable[[str], None]) -> None:
    """Delete every id; report each failure, then fail once for all of them."""
    failed = 0
    for one in ids:
        try:
            delete(one)
        except Exception as err:  # noqa: BLE001 - reported, then summarised
            failed += 1
            LOG.error("failed to delete %s %s: %s", what, one, err)
    if failed:
        raise exceptions.CommandError(f"{failed} of {len(ids)} {what}s failed to delete")


def without_none(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}
