"""The package's import structure, read from the source with ``ast``: no cycles, nothing below the façade imports it,
and each room imports only the rooms below it in the pipeline (ARCHITECTURE.md draws the same order).

Every import counts, at module level or inside a function: an import deferred to dodge a cycle is still one.  A
package's ``__init__`` runs when a module below it is imported; that is Python's doing, not a dependency a module
declares, so it is not an edge here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "duckanon"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE
# The façade and what stands above it: they may import anything; nothing else may import them.
ABOVE_THE_FACADE = ("duckanon", "duckanon.__main__", "duckanon.session", "duckanon.cli")
# The rooms from the bottom up: a room may import its own modules and those of the rooms before it.
LAYERS = (
    ("_version", "errors", "deferred"),
    ("parameters",),
    ("sqlgen",),
    ("engine",),
    ("hierarchy",),
    ("risk",),
    ("privacy",),
    ("utility",),
    ("recode",),
    ("declare",),
    ("encode",),
    ("release",),
    ("search", "partition", "cluster", "perturb", "aggregate"),
    ("report",),
    ("datasets",),
)

def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports (a name imported from a package counts as its submodule when
    there is one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin
                       for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t == PACKAGE or t.startswith(PACKAGE + "."))
    return {t for t in found if t in known} - {name}


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return result


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def above_the_facade(module: str) -> bool:
    return any(module == top or module.startswith(top + ".") for top in ABOVE_THE_FACADE if top != PACKAGE) \
        or module == PACKAGE


def test_the_walk_sees_the_package():
    edges = graph()
    assert {"duckanon.session", "duckanon.engine.base", "duckanon.privacy.checks"} <= set(edges)
    assert "duckanon.privacy.models" in edges["duckanon.privacy.checks"]


def test_no_import_cycles():
    found = cycles(graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_nothing_below_the_facade_imports_it():
    edges = graph()
    offending = sorted(f"{module} imports {target}" for module, targets in edges.items()
                       if not above_the_facade(module) for target in targets if above_the_facade(target))
    assert offending == []


def test_each_room_imports_only_rooms_below_it():
    level = {name: i for i, names in enumerate(LAYERS) for name in names}
    edges = graph()
    rooms = {room(m) for m in edges if not above_the_facade(m)}
    assert rooms <= set(level), f"rooms missing from LAYERS: {sorted(rooms - set(level))}"
    offending = sorted(f"{module} imports {target}" for module, targets in edges.items()
                       if not above_the_facade(module) for target in targets if not above_the_facade(target)
                       if room(target) != room(module) and level[room(target)] >= level[room(module)])
    assert offending == []


@pytest.mark.parametrize("source, expected", [
    ("from .b import x\n", {"duckanon.r.b"}),
    ("from . import b\n", {"duckanon.r.b"}),
    ("from .. import errors\n", {"duckanon.errors"}),
    ("from ..s import y\n", {"duckanon.s"}),
    ("def f():\n    from duckanon.s.t import z\n", {"duckanon.s.t"}),
    ("import duckanon.errors\n", {"duckanon.errors"}),
])
def test_imports_are_resolved_as_python_resolves_them(tmp_path, source, expected):
    path = tmp_path / "a.py"
    path.write_text(source)
    known = {"duckanon.r.a", "duckanon.r.b", "duckanon.errors", "duckanon.s", "duckanon.s.t"}
    assert imports("duckanon.r.a", path, known) == expected


def test_a_cycle_is_found_and_named():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
