"""YAML output without anchors: kubectl and GitOps tools read plain documents best."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml


class _PlainDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:  # shared sub-schemas must be written out in full
        return True


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    # Multi-line strings (rendered INI files) as literal blocks, readable in review.
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_PlainDumper.add_representer(str, _str_presenter)


def dump_all(documents: Iterable[Any]) -> str:
    return yaml.dump_all(list(documents), Dumper=_PlainDumper, sort_keys=False, default_flow_style=False, width=120)
