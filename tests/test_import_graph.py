"""The import graph of her_rl/, importlib included, has no circle: not between modules and not between
folders (a folder's modules may import each other; two folders never import each other, by any path).

Every import counts: at the top of a file, inside a function (the imports kept lazy so the CLI starts
without torch), and a dotted name of her_rl in a string (what ``importlib`` imports from it)."""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "her_rl"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}
# Named in a string as Hydra's config search path: the YAML files, not code a module calls (the package's
# __init__ stores the configs made from the learner classes, for any caller of Hydra's compose API).
DATA = ("her_rl.conf",)


def _resolve(name: str) -> str | None:
    """The her_rl module an imported name lives in (``her_rl.rl.her.HindsightMemory`` -> ``her_rl.rl.her``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> set[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value not in DATA
              and re.fullmatch(r"her_rl(\.\w+)+", node.value)):
            names = [node.value]  # a dotted name in a string: what importlib will import from it
        for name in names:
            target = _resolve(name) if name.startswith("her_rl") else None
            if target and target != module and not module.startswith(target + "."):  # a package's own __init__ aside
                found.add(target)
    return found


GRAPH = {m: imports(m) for m in MODULES}


def _folder(module: str) -> str:
    """The room a module stands in: ``her_rl.config.gate`` -> ``her_rl.config``; a top-level file is its own."""
    parts = module.split(".")
    if len(parts) > 2 or MODULES[module].name == "__init__.py":
        return ".".join(parts[:2])
    return module


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_module_imports_itself_back_by_any_path():
    assert _circle(GRAPH) is None, " -> ".join(_circle(GRAPH))


def test_no_two_folders_import_each_other_by_any_path():
    folders: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        edges = folders.setdefault(_folder(module), set())
        edges |= {_folder(t) for t in targets if _folder(t) != _folder(module) and t != "her_rl"}
    circle = _circle(folders)
    if circle:
        pairs = [(a, b) for a, b in zip(circle, circle[1:])]
        why = [f"{a} -> {b}: " + ", ".join(sorted(f"{m} imports {t}" for m, ts in GRAPH.items() for t in ts
                                                   if _folder(m) == a and _folder(t) == b)) for a, b in pairs]
        raise AssertionError("; ".join(why))


def test_the_graph_sees_function_level_imports():
    assert "her_rl.algos.her_dqn" in GRAPH["her_rl.config.registry"]  # learners(): imported on first use
    assert len(GRAPH) > 60 and sum(map(len, GRAPH.values())) > 200
