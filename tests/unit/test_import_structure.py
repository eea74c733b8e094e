"""The package structure docs/architecture.md states, read from the source: no
import cycle (lazy imports inside functions included: they hide a cycle, they do
not remove it), no private name imported from another package, and the
boundaries between components."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "isthmus"


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # the isthmus module the statement loads
    name: str | None  # the name taken from it (``from x import name``), None for ``import x``


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, except what sits under ``if TYPE_CHECKING:`` (never imported at run time)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(source: str, module: str, is_package: bool, known: Mapping[str, object]) -> list[Import]:
    """The isthmus modules ``module`` imports, resolved to the deepest known module."""

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = resolve(alias.name) if alias.name.split(".")[0] == "isthmus" else None
                if target and target != module:
                    found.append(Import(module, target, None))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source_module = ".".join(base + ([node.module] if node.module else []))
            else:
                source_module = node.module or ""
            if source_module.split(".")[0] != "isthmus":
                continue
            for alias in node.names:
                submodule = f"{source_module}.{alias.name}"
                target = submodule if submodule in known else resolve(source_module)
                if target and target != module:
                    found.append(Import(module, target, None if target == submodule else alias.name))
    return found


def all_imports(root: Path = ROOT) -> list[Import]:
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    return [imp for name, path in sorted(paths.items())
            for imp in imports_of(path.read_text(), name, path.name == "__init__.py", paths)]


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _package(module: str) -> str:
    return module.rpartition(".")[0]


def private_imports(imports: list[Import]) -> list[Import]:
    """``from a.b import _name`` where ``a.b`` is not in the importer's own package."""
    return [imp for imp in imports
            if imp.name and imp.name.startswith("_") and not imp.name.startswith("__")
            and _package(imp.target) != _package(imp.importer) and imp.target != _package(imp.importer)]


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return all_imports()


def test_the_cycle_finder_finds_cycles_and_nothing_else() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_a_lazy_import_inside_a_function_counts_and_type_checking_does_not() -> None:
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from isthmus.b import x\n"
              "def f():\n    from isthmus.c import _y\n")
    found = imports_of(source, "isthmus.a", False, {"isthmus.a": 1, "isthmus.b": 1, "isthmus.c": 1})
    assert found == [Import("isthmus.a", "isthmus.c", "_y")]
    assert private_imports(found) == []  # same package: isthmus
    assert private_imports([Import("isthmus.a.x", "isthmus.b.y", "_z")]) == [Import("isthmus.a.x", "isthmus.b.y", "_z")]


def test_no_import_cycle_in_isthmus(imports: list[Import]) -> None:
    edges: dict[str, set[str]] = {}
    for imp in imports:
        edges.setdefault(imp.importer, set()).add(imp.target)
    assert cycles(edges) == []


def test_no_module_imports_a_private_name_of_another_package(imports: list[Import]) -> None:
    assert private_imports(imports) == []


def _crossing(imports: list[Import], importer: str, target: str) -> list[str]:
    return sorted({f"{i.importer} -> {i.target}" for i in imports
                   if (i.importer + ".").startswith(importer + ".") and (i.target + ".").startswith(target + ".")})


@pytest.mark.parametrize("importer,target,why", [
    ("isthmus.gateway", "isthmus.network", "the gateway never imports Neutron plugins"),
    ("isthmus.network.local", "isthmus.network.central", "the local plugin reaches central only over REST"),
    ("isthmus.network.reconcilers", "isthmus.network.local", "the worker shares pure pieces (isthmus.network), "
                                                            "never a plugin"),
    ("isthmus.network.reconcilers", "isthmus.network.central", "the worker reaches central Neutron over REST"),
    ("isthmus.jobs", "isthmus.network", "the job engine names no handler: handlers register"),
    ("isthmus.registry", "isthmus.network", "the registry is read by every component and reads none"),
    ("isthmus.clients", "isthmus.network", "clients are shared pieces under the components"),
])
def test_component_boundaries(imports: list[Import], importer: str, target: str, why: str) -> None:
    assert _crossing(imports, importer, target) == [], why


def test_product_code_never_imports_the_sandbox(imports: list[Import]) -> None:
    outside = [f"{i.importer} -> {i.target}" for i in imports
               if (i.target + ".").startswith("isthmus.sandbox.")
               and not (i.importer + ".").startswith("isthmus.sandbox.") and i.importer != "isthmus.cli.sandbox"]
    assert outside == []


def test_the_ccm_is_standalone(imports: list[Import]) -> None:
    """It runs in a tenant's cluster: only its own package, the shared Kubernetes pieces and
    the dependency-free circuit breaker."""
    strangers = sorted({f"{i.importer} -> {i.target}" for i in imports
                        if (i.importer + ".").startswith("isthmus.ccm.")
                        and not any((i.target + ".").startswith(p)
                                    for p in ("isthmus.ccm.", "isthmus.kube.", "isthmus.breaker."))})
    assert strangers == []


# --- docs/architecture.md's code map, checked against the imports ----------------------------
DOC = ROOT.parent / "docs" / "architecture.md"
UNCHECKED = {"every component", "everything but the CLI"}  # the CLI and the sandbox wire everything


@dataclass(frozen=True)
class MapRow:
    modules: tuple[str, ...]  # the dotted modules or packages the row covers
    imports: frozenset[str] | None  # the rows it may import, by name; None: anything
    points_up: bool  # the row says which of its imports points up the table


def row_name(module: str) -> str:
    """How the table names a row in its imports column: its path below isthmus/."""
    return module.removeprefix("isthmus.").replace(".", "/")


def code_map(text: str) -> list[MapRow]:
    rows = []
    section = text.split("## Code map", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`isthmus/"):
            continue
        paths = [p for p in cells[0].split("`")[1::2]]
        base = paths[0].rsplit("/", 2)[0] if paths[0].endswith("/") else paths[0].rsplit("/", 1)[0]
        modules = tuple(
            (p if p.startswith("isthmus/") else f"{base}/{p}").rstrip("/").removesuffix(".py").replace("/", ".")
            for p in paths)
        declared = cells[2]
        names = None if declared in UNCHECKED else frozenset(
            n.split("(")[0].strip() for n in declared.split(",") if n.strip() not in ("", "-"))
        rows.append(MapRow(modules, names, "pointing up" in cells[1]))
    return rows


def test_the_code_map_parser_reads_rows() -> None:
    text = ("## Code map\n| package | what | imports | extra | runs |\n|---|---|---|---|---|\n"
            "| `isthmus/a.py`, `b.py` | shared | - | base | library |\n"
            "| `isthmus/c/`, `d/` | the one import pointing up | a, e (lazily) | x | y |\n"
            "| `isthmus/e/` | all | every component | x | y |\n## Next\n| `isthmus/z/` | | | | |\n")
    assert code_map(text) == [
        MapRow(("isthmus.a", "isthmus.b"), frozenset(), False),
        MapRow(("isthmus.c", "isthmus.d"), frozenset({"a", "e"}), True),
        MapRow(("isthmus.e",), None, False)]


def test_the_code_map_covers_every_package_and_its_imports(imports: list[Import]) -> None:
    """Every package is in the table; every import between rows is one its row names
    and points down the table (except the one its row says points up)."""
    rows = code_map(DOC.read_text())
    owner: dict[str, int] = {}
    for index, row in enumerate(rows):
        for module in row.modules:
            owner[module] = index

    def mapped(module: str) -> str:
        """The module or package of the table that holds ``module`` ("" for none)."""
        while module and module not in owner:
            module = module.rpartition(".")[0]
        return module

    packages = {module_name(p) for p in ROOT.rglob("*.py")} - {"isthmus"}
    assert sorted(m for m in packages if not mapped(m)) == [], "packages missing from the code map"
    undeclared, upward = set(), set()
    for imp in imports:
        importer, target = mapped(imp.importer), mapped(imp.target)
        if not importer or not target or owner[importer] == owner[target]:
            continue
        mine, theirs = owner[importer], owner[target]
        row, target_name = rows[mine], row_name(target)
        if row.imports is None:
            continue
        if target_name not in row.imports:
            undeclared.add(f"{imp.importer} -> {imp.target} (row names {sorted(row.imports)})")
        if theirs > mine and not row.points_up:
            upward.add(f"{imp.importer} -> {imp.target}")
    assert sorted(undeclared) == [], "imports the code map does not name"
    assert sorted(upward) == [], "imports pointing up the code map"
