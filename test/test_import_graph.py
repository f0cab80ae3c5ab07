"""No import cycle among the modules of ``underactuated_control``.

Oracle: the package's own source, parsed with ``ast`` (no module is imported): every ``import``
and ``from ... import`` statement, at module level or inside a function, relative imports
resolved against the importing module, ``from package import name`` counted as an import of
``package.name`` when that is a module; imports under ``if TYPE_CHECKING:`` never run and are
left out. A cycle is reported with its modules in order.

One call-time edge is known and allowed: ``RobotModel.from_urdf`` (model.py) imports the loader
``urdf.load_model`` inside the method, the loader builds the model's own types (the Pinocchio
``buildModel`` arrangement, documented in model.py). It is allowed only as an import inside a
function; the same edge at module level is a cycle like any other."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "underactuated_control"
SOURCE = Path(__file__).resolve().parents[1] / PACKAGE


CALL_TIME_EDGES = {(f"{PACKAGE}.model", f"{PACKAGE}.urdf")}


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package."""
    out = {}
    for path in sorted(SOURCE.rglob("*.py")):
        parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _statements(tree: ast.AST):
    """(import statement, inside a function?) of a module, without ``if TYPE_CHECKING:``
    blocks."""
    stack = [(tree, False)]
    while stack:
        node, in_function = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend((child, in_function) for child in node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports (anywhere in its file)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

    def add(target: str, in_function: bool) -> None:
        # the module itself, or the nearest enclosing module of the package (a name in it)
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name and not (in_function and (name, target)
                                                in CALL_TIME_EDGES):
            found.add(target)

    for node, in_function in _statements(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    add(alias.name, in_function)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                full = f"{source}.{alias.name}"
                add(full if full in modules else source, in_function)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        path = [root]
        stack = [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_the_parser_sees_relative_and_function_level_imports():
    graph = import_graph()
    assert f"{PACKAGE}.model" in graph[PACKAGE]  # from .model import RobotModel
    assert any(graph.values()) and len(graph) > 20
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_the_package():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
