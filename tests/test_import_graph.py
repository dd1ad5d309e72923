"""The package's modules import each other one way: no cycle, counting imports inside functions
(a lazy import hides a cycle from the interpreter, not from a reader). Read from the source with ast."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def imports() -> dict[str, set[str]]:
    """Module name -> the package's modules it imports anywhere in its source."""
    graph: dict[str, set[str]] = {}
    for path in (SRC / "wy_ascend").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        is_init = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_init else parts)
        package = name.split(".") if is_init else name.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                if node.module:
                    deps.add(f"{base}.{node.module}")
                else:  # from . import x: x a module of the package (a name of its __init__ otherwise)
                    deps.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("wy_ascend"):
                deps.add(node.module or "")
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("wy_ascend"))
        graph[name] = deps - {name}
    return {name: {d for d in deps if d in graph} for name, deps in graph.items()}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (a path that ends where it starts), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [node, dep] if dep in path else [node, dep]
            if dep not in state and (found := visit(dep, path + [node])):
                return found
        state[node] = 2
        return None

    return next((c for node in sorted(graph) if node not in state and (c := visit(node, [])) is not None), None)


def test_the_package_has_no_import_cycle() -> None:
    graph = imports()
    assert "wy_ascend.testing.warm" in graph and "wy_ascend.testing.child" in graph["wy_ascend.testing.runner"]
    assert cycle(graph) is None, f"import cycle: {' -> '.join(cycle(graph) or [])}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
