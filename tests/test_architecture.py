"""The package's shape (issue 25): folders named after the pipeline's stages, every import running down
the stages, no import circles, few modules left at the root. Read from the source, so a new module or
import that breaks the plan fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "ccviz"

# Bottom to top: a module may import from its own stage and the stages below it, never above.
STAGES = ["errors", "model", "builders", "judge", "bounds", "synth", "interop", "runs", "advise", "viz", "app", "cli"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Every ccviz module ``path`` imports, at the top or inside a function (``from ccviz.x import y`` counts
    ``ccviz.x.y`` where that is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name in known and name.startswith("ccviz.")}


def import_graph() -> nx.DiGraph:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(paths)
    for name, path in paths.items():
        if name == "ccviz":  # the facade resolves public names lazily from every stage
            continue
        for target in imported_modules(path, set(paths)):
            if target != name and target != "ccviz":
                graph.add_edge(name, target)
    return graph


def stage_of(module: str) -> int:
    return STAGES.index(module.split(".")[1])


def test_at_most_six_modules_at_the_root() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= 6, root


def test_every_module_sits_in_a_known_stage() -> None:
    for module in import_graph():
        if module != "ccviz":
            assert module.split(".")[1] in STAGES, f"{module} is in no stage of {STAGES}"


def test_no_import_circles() -> None:
    graph = import_graph()
    cycles = list(nx.simple_cycles(graph, length_bound=6))
    assert not cycles, f"import circles: {cycles[:5]}"


def test_every_import_runs_down_the_stages() -> None:
    upward = [(a, b) for a, b in import_graph().edges if stage_of(b) > stage_of(a)]
    assert not upward, f"imports that run up the stages {STAGES}: {upward}"


def test_the_architecture_page_names_every_module() -> None:
    page = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text()
    missing = [module for module in import_graph()
               if module != "ccviz" and not module.endswith("__init__")
               and module.rsplit(".", 1)[-1] not in page]
    assert not missing, f"docs/ARCHITECTURE.md does not name {missing}"


def test_the_project_imports_no_old_module_path() -> None:
    """The old paths are aliases for notebooks; the project's own code names the stages."""
    import ccviz

    roots = [PACKAGE, PACKAGE.parent / "tests", PACKAGE.parent / "pages", PACKAGE.parent / "bench"]
    files = [p for root in roots for p in root.rglob("*.py")] + [PACKAGE.parent / "app.py"]
    old = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            old += [f"{path.name}: {name}" for name in names if name in ccviz.MOVED]
    assert not old, old
