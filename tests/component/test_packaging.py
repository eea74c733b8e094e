"""Each component's extra carries what the component imports, and no more than
it needs: ``pip install 'isthmus[network]'`` brings no Kubernetes client.

The closure of an extra is read from the installed distributions' metadata (what
pip would resolve); each component's entry points are then imported in a fresh
interpreter in which every third-party module outside that closure is missing,
as on a host where only that extra was installed."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]


def closure(name: str, extras: tuple[str, ...] = ()) -> set[str]:
    """The distributions ``pip install 'name[extras]'`` installs (canonical names)."""
    found: set[str] = set()
    done: set[tuple[str, frozenset[str]]] = set()
    todo = [(name, frozenset(extras))]
    while todo:
        dist_name, wanted = todo.pop()
        key = canonicalize_name(dist_name)
        if (key, wanted) in done:
            continue
        done.add((key, wanted))
        found.add(key)
        for text in metadata.distribution(dist_name).requires or []:
            req = Requirement(text)
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (wanted or {""})):
                continue
            todo.append((req.name, frozenset(req.extras)))
    return found


def top_level_modules(distributions: set[str]) -> set[str]:
    return {module for module, dists in metadata.packages_distributions().items()
            if any(canonicalize_name(d) in distributions for d in dists)}


def _installed(distributions: set[str]) -> str:
    return json.dumps({"modules": sorted(top_level_modules(distributions)), "distributions": sorted(distributions)})


_IMPORT_ONLY = """
import importlib, importlib.abc, importlib.metadata, json, sys
from importlib.machinery import PathFinder
installed = json.loads(sys.argv[1])
allowed, dists = set(installed["modules"]), set(installed["distributions"])

def canonical(name):
    return name.lower().replace("_", "-").replace(".", "-")

class Installed(importlib.abc.MetaPathFinder):
    # sys.path's finder, blind to what the extra does not install (modules and metadata)
    def find_spec(self, name, path, target=None):
        top = name.partition(".")[0]
        if top in allowed or top in sys.stdlib_module_names or top in ("isthmus", "__main__") or top.startswith("_"):
            return PathFinder.find_spec(name, path, target)
        return None

    def find_distributions(self, context=None):
        for dist in PathFinder.find_distributions(context or importlib.metadata.DistributionFinder.Context()):
            if canonical(dist.metadata["Name"]) in dists:
                yield dist

sys.meta_path[:] = [Installed() if finder is PathFinder else finder for finder in sys.meta_path]
for module in sys.argv[2:]:
    importlib.import_module(module)
"""

# component -> (extra, entry modules, distributions its host provides)
COMPONENTS = {
    "xjob": ("network", ["isthmus.jobs.worker", "isthmus.network.reconcilers", "isthmus.cli.main",
                         "isthmus.cli.db"], ()),
    "neutron plugins": ("network", ["isthmus.network.central.plugin", "isthmus.network.central.l3",
                                    "isthmus.network.local.plugin"], ("neutron",)),
    "gateway": ("gateway", ["isthmus.gateway.service"], ()),
    "admin": ("admin", ["isthmus.admin.wsgi"], ()),
    "ccm": ("ccm", ["isthmus.ccm.service"], ()),
    "operator": ("operator", ["isthmus.operator.__main__"], ()),
    "topology": ("topology", ["isthmus.cli.topology", "isthmus.topology.model"], ()),
    "client": ("client", ["isthmus.cli.osc.plugin"], ()),
}


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_a_component_runs_on_what_its_extra_installs(component: str) -> None:
    extra, modules, host = COMPONENTS[component]
    distributions = closure("isthmus", (extra,))
    for provided in host:
        distributions |= closure(provided)
    result = subprocess.run([sys.executable, "-c", _IMPORT_ONLY, _installed(distributions), *modules],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, f"isthmus[{extra}] lacks what {component} imports:\n{result.stderr[-3000:]}"


def test_the_network_extra_brings_no_kubernetes_client() -> None:
    network = closure("isthmus", ("network",))
    assert not network & {"kubernetes", "kopf", "openstacksdk", "aiohttp", "keystonemiddleware"}, sorted(network)


def test_the_ccm_extra_brings_no_openstack_service() -> None:
    ccm = closure("isthmus", ("ccm",))
    assert "kubernetes" in ccm and not ccm & {"neutron", "nova", "neutron-lib", "kopf"}, sorted(ccm)


def test_the_blocker_makes_a_module_outside_the_closure_missing() -> None:
    """The check above can fail: the base alone cannot import the gateway."""
    result = subprocess.run([sys.executable, "-c", _IMPORT_ONLY, _installed(closure("isthmus")),
                             "isthmus.gateway.service"],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode != 0 and "No module named 'aiohttp'" in result.stderr, result.stderr[-2000:]
