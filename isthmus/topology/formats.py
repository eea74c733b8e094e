"""Text renderings of a :class:`~isthmus.topology.model.Topology`: table, JSON, YAML, Graphviz dot.

Each reads only the model, so the CLI and the web page cannot disagree.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from isthmus.topology.model import NetworkBand, NetworkCopy, PortView, Topology

FORMATS = ("table", "json", "yaml", "dot")


def render(topology: Topology, fmt: str, raw: bool = False) -> str:
    if fmt == "json":
        return json.dumps(topology.to_dict(raw=raw), indent=2, sort_keys=False) + "\n"
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(topology.to_dict(raw=raw), sort_keys=False)
    if fmt == "dot":
        return to_dot(topology)
    if fmt == "table":
        return to_table(topology)
    raise ValueError(f"format: one of {', '.join(FORMATS)}, not {fmt!r}")


# -- table ---------------------------------------------------------------------------


def _carried(copy: NetworkCopy) -> str:
    """How the region reaches ports bound elsewhere: shadows, or OVN remote ports."""
    remote = _ports(copy.remote_ports)
    return ", ".join(x for x in (_ports(copy.shadows), f"remote: {remote}" if remote else "") if x)


def to_table(topology: Topology) -> str:
    """Sections: regions, one row per network and region, routers, jobs."""
    sections = [
        _table(("Region", "Health", "AZ", "Backend", "Errors"),
               [(r.name + (" (central)" if r.central else ""), "ok" if r.healthy else "UNHEALTHY",
                 r.availability_zone or "", r.backend or "", "; ".join(f"{k}: {v}" for k, v in r.errors.items()))
                for r in topology.regions]),
        _table(("Network", "Region", "Copy", "Segment", "Servers", "Shadows / remote ports", "Drift"),
               [(f"{band.name} ({band.id})" if i == 0 else "", copy.region, _presence(copy), _segment(copy),
                 _ports(copy.servers), _carried(copy), _drift_text(copy))
                for band in topology.networks for i, copy in enumerate(band.copies.values())]),
    ]
    if topology.routers:
        sections.append(_table(("Router", "Region", "Half", "Gateway", "Routes", "Drift"),
                               [(f"{r.name} ({r.id})" if i == 0 else "", h.region, h.id, "yes" if h.gateway else "",
                                str(h.routes), ", ".join(d.attribute for d in h.drift))
                                for r in topology.routers for i, h in enumerate(r.halves.values())]
                               or [(f"{r.name} ({r.id})", "", "(no half)", "", "", "") for r in topology.routers]))
    jobs = topology.jobs
    counts = ", ".join(f"{k} {v}" for k, v in jobs.counts.items())
    sections.append(f"Jobs: backlog {jobs.backlog} ({counts or 'unknown'})"
                    + (f"; error: {jobs.error}" if jobs.error else ""))
    if jobs.failed:
        sections.append(_table(("Failed job", "Type", "Resource", "Failures", "Last error"),
                               [(j.id, j.type, j.resource_id, str(j.failures), (j.last_error or "")[:120])
                                for j in jobs.failed]))
    return "\n\n".join(sections) + "\n"


def _presence(copy: NetworkCopy) -> str:
    if copy.unknown:
        return "unknown (region unreadable)"
    return (copy.status or "present") if copy.present else "-"


def _segment(copy: NetworkCopy) -> str:
    return f"{copy.network_type}/{copy.segmentation_id}" if copy.network_type else ""


def _ports(ports: Sequence[PortView]) -> str:
    return ", ".join(_port_label(p) for p in ports)


def _port_label(port: PortView) -> str:
    name = port.server_name or port.id[:8]
    return f"{name} {' '.join(port.ips)}".strip()


def _drift_text(copy: NetworkCopy) -> str:
    parts = [f"{d.attribute}: {d.central!r} -> {d.region!r}" for d in copy.drift]
    parts += [f"no shadow of {port_id[:8]}" for port_id in copy.missing_shadows]
    parts += [f"{port_id[:8]} gone at central" for port_id in copy.orphans]
    return "; ".join(parts)


def _table(headings: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    import prettytable

    table = prettytable.PrettyTable(list(headings))
    table.align = "l"
    for row in rows:
        table.add_row([str(c) for c in row])
    return table.get_string()


# -- dot -----------------------------------------------------------------------------


def to_dot(topology: Topology) -> str:
    """One cluster per region holding its network copies, servers and shadows; edges
    from each shadow to the server port it stands for, and from router halves to
    their router. Drift and unhealthy regions are red."""
    lines = ["digraph topology {", '  graph [rankdir=LR, fontname="sans-serif"];',
             '  node [shape=box, fontname="sans-serif", fontsize=10];']
    for region in topology.regions:
        style = "" if region.healthy else ', color=red, fontcolor=red, style=dashed'
        label = region.name + ("" if region.healthy else " (UNHEALTHY)")
        lines.append(f'  subgraph "cluster_{_id(region.name)}" {{')
        lines.append(f'    label={_q(label)}{style};')
        for band in topology.networks:
            copy = band.copies.get(region.name)
            if copy is None or not (copy.present or copy.servers):
                continue
            lines += [f"    {line}" for line in _copy_nodes(band, copy)]
        for router in topology.routers:
            half = router.halves.get(region.name)
            if half is not None:
                color = ", color=red" if half.drift else ""
                lines.append(f'    {_q("half:" + half.id)} [label={_q("half of " + router.name)}, '
                             f'shape=hexagon{color}];')
        lines.append("  }")
    for router in topology.routers:
        lines.append(f'  {_q("router:" + router.id)} [label={_q("router " + router.name)}, shape=hexagon];')
        lines += [f'  {_q("half:" + h.id)} -> {_q("router:" + router.id)} [style=dotted];'
                  for h in router.halves.values()]
    for band in topology.networks:
        for copy in band.copies.values():
            for shadow in copy.shadows:
                lines.append(f'  {_q(f"shadow:{copy.region}:{shadow.id}")} -> {_q("port:" + shadow.id)} '
                             '[style=dashed, label="shadow of"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _copy_nodes(band: NetworkBand, copy: NetworkCopy) -> list[str]:
    net_node = f"net:{copy.region}:{band.id}"
    label = f"{_esc(band.name)}\\n{_segment(copy) or ('no copy' if not copy.present else '')}"
    if copy.drifted:
        label += "\\nDRIFT: " + _esc(_drift_text(copy))
    attrs = ", color=red, fontcolor=red" if copy.drifted else ""
    lines = [f'{_q(net_node)} [label="{label}", shape=box3d{attrs}];']
    for port in copy.servers:
        lines.append(f'{_q("port:" + port.id)} [label={_q(_port_label(port))}, shape=component];')
        lines.append(f'{_q("port:" + port.id)} -> {_q(net_node)};')
    for port in copy.shadows:
        node = f"shadow:{copy.region}:{port.id}"
        lines.append(f'{_q(node)} [label={_q("shadow " + _port_label(port))}, style=dashed];')
        lines.append(f'{_q(node)} -> {_q(net_node)};')
    return lines


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid dot ID: quoted, backslash-escaped


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _id(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)
