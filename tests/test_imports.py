"""The package's modules import each other in layers: no circle, not even through an import
inside a function or under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from importlib.util import resolve_name
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "eclaw"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    """Each eclaw module and the eclaw modules it imports, wherever the import stands."""
    modules = {_module(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = resolve_name("." * node.level + (node.module or ""), package) if node.level else node.module
                # ``from eclaw.http import urls`` imports the module eclaw.http.urls, not the package's face
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else str(base) for a in node.names]
            graph[name].update(target for target in targets if target in modules and target != name)
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of imports (its modules in order), or ``[]``."""
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> list[str]:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return []
        path.append(name)
        for target in sorted(graph[name]):
            found = visit(target)
            if found:
                return found
        path.pop()
        done.add(name)
        return []

    for name in sorted(graph):
        found = visit(name)
        if found:
            return found
    return []


def test_no_import_circle() -> None:
    circle = _circle(_graph())
    assert not circle, "import circle: " + " -> ".join(circle)


def test_a_circle_is_found() -> None:
    graph = _graph()
    graph["eclaw.http.response"].add("eclaw.discovery.links")  # the HTTP layer importing the one above
    circle = _circle(graph)
    assert circle[0] == circle[-1]
    assert {"eclaw.http.response", "eclaw.discovery.links"} <= set(circle)
