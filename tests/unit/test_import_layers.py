"""The package's import graph has no circles and no import from a lower layer to a higher one (docs/DESIGN.md,
"Layers"). Read from the source with `ast`, so a module that is never imported in a test is checked too.

Every import counts, also one inside a function: a lazy import that closes a circle is still a circle, only
hidden until the function runs. An import under `if TYPE_CHECKING:` never runs, so it cannot close a circle (of
modules or of packages), but it still names a layer: an annotation may look down or sideways, never up (but for
ANNOTATION_ONLY).
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# Settings are one type every Protocol's signature names (`ctx: Context`), so an annotation may name it from any
# layer; they are built from the presets and the calibration file that `quality` reads, so they sit above it.
ANNOTATION_ONLY = {"selfcrag.context"}

# Lowest first. A module belongs to the longest name here that is a prefix of its own; within a layer, modules and
# packages may import each other as long as no circle forms.
LAYERS: list[tuple[str, ...]] = [
    ("selfcrag.text", "selfcrag.language", "selfcrag.data_sections", "selfcrag.errors",
     "selfcrag.stopping"),  # pure functions; errors; whether the process is stopping
    ("selfcrag.contract", "selfcrag.state", "selfcrag.endpoints", "selfcrag.home",
     "selfcrag.setting_names"),  # shared types; env facts; which setting names exist
    ("selfcrag.quality",),  # checks and scores over text and those types; the presets and calibration settings load
    ("selfcrag.context", "selfcrag.trust_boundary", "selfcrag.prompts", "selfcrag.ledger",
     "selfcrag.chat"),  # settings, what a run may change of them, and what reads them
    ("selfcrag.store",),  # what lasts between runs: the database, run records, the review queue, leases
    ("selfcrag.knowledge",),  # the index: build, store, load, search
    ("selfcrag.offline",),  # the deterministic reasoner (reads stored vectors through knowledge)
    ("selfcrag.llm",),  # the model-backed reasoner (falls back on offline's rules)
    ("selfcrag.backend", "selfcrag.web_search"),  # which reasoner a run uses; the web, with the model's deadlines
    ("selfcrag.routing", "selfcrag.streaming", "selfcrag.progress", "selfcrag.progress_bar", "selfcrag.identities",
     "selfcrag.review_case", "selfcrag.testing", "selfcrag.tool"),
    ("selfcrag.nodes",),
    ("selfcrag.graph", "selfcrag.indexer", "selfcrag.auth",
     "selfcrag.server_paths"),  # the two graphs langgraph.json serves, its auth, and its guard on the server's paths
    ("selfcrag.threads",),  # the graph on a thread that persists; a review decided by resuming it
    ("selfcrag.terminal", "selfcrag.cli_store", "selfcrag.evaluation"),
    ("selfcrag.cli", "selfcrag"),  # the front doors: the command line and the Python API
]


def modules(src: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_only(tree: ast.Module) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(inner) for branch in node.body for inner in ast.walk(branch))
    return hidden


def imports(src: Path) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """(imports that run, imports for type checkers only): module -> {imported module: line}, selfcrag only."""
    found = modules(src)
    runs: dict[str, dict[str, int]] = {name: {} for name in found}
    typed: dict[str, dict[str, int]] = {name: {} for name in found}
    for name, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        hidden = _type_only(tree)
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in found else base for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in found:  # `import a.b.c` names a module; `from a import f`, a function
                    target = target.rpartition(".")[0]
                if target and target != name:
                    (typed if id(node) in hidden else runs)[name].setdefault(target, node.lineno)
    return runs, typed


def layer_of(module: str) -> tuple[int, str] | None:
    best: tuple[int, str] | None = None
    for level, names in enumerate(LAYERS):
        for owner in names:
            inside = module == owner or (owner != "selfcrag" and module.startswith(owner + "."))  # root: itself only
            if inside and (best is None or len(owner) > len(best[1])):
                best = (level, owner)
    return best


def _circle(graph: dict[str, dict[str, int]], start: str) -> list[str] | None:
    """The shortest path from `start` back to itself, if any."""
    came: dict[str, str] = {}
    todo = deque([start])
    while todo:
        here = todo.popleft()
        for there in graph.get(here, {}):
            if there == start:
                path = [here]
                while path[-1] != start:
                    path.append(came[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if there not in came:
                came[there] = here
                todo.append(there)
    return None


def _circles(graph: dict[str, dict[str, int]]) -> list[str]:
    shown: list[str] = []
    seen: set[frozenset[str]] = set()
    for start in sorted(graph):
        path = _circle(graph, start)
        if path and frozenset(path) not in seen:
            seen.add(frozenset(path))
            steps = [f"{a} (line {graph[a][b]})" if graph[a][b] else a for a, b in zip(path, path[1:], strict=False)]
            shown.append(" -> ".join([*steps, path[-1]]))
    return shown


def problems(src: Path) -> list[str]:
    runs, typed = imports(src)
    found: list[str] = [f"{name}: in no layer of LAYERS" for name in runs if layer_of(name) is None]
    owner = {name: layer_of(name) or (len(LAYERS), "no layer") for name in runs}
    for edges, kind in ((runs, "imports"), (typed, "imports for type checking")):
        for name, targets in sorted(edges.items()):
            for target, line in sorted(targets.items()):
                (low, lower), (high, higher) = owner[name], owner[target]
                if high > low and high < len(LAYERS) and not (edges is typed and target in ANNOTATION_ONLY):
                    found.append(f"upward: {name} (line {line}, layer {low} {lower}) {kind} {target} "
                                 f"(layer {high} {higher})")
    found += [f"circle: {path}" for path in _circles(runs)]
    packages: dict[str, dict[str, int]] = {}
    for name, targets in runs.items():
        for target in targets:
            a, b = owner[name][1], owner[target][1]
            if a != b:
                packages.setdefault(a, {}).setdefault(b, 0)
    found += [f"circle between packages: {path}" for path in _circles(packages)]
    return found


def test_no_circle_and_no_upward_import() -> None:
    found = problems(SRC)
    assert not found, "\n".join(found)


def test_the_check_sees_a_circle_and_an_upward_import(tmp_path: Path) -> None:
    package = tmp_path / "selfcrag"
    (package / "text").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "text" / "__init__.py").write_text("")
    (package / "text" / "a.py").write_text("from selfcrag.text import b\n")
    (package / "text" / "b.py").write_text("def f():\n    from selfcrag.text.a import x\n")
    (package / "context.py").write_text("from selfcrag.graph import build_graph\n")
    (package / "graph.py").write_text("")
    found = problems(tmp_path)
    assert "circle: selfcrag.text.a (line 1) -> selfcrag.text.b (line 2) -> selfcrag.text.a" in found
    upward = [line for line in found if line.startswith("upward: selfcrag.context (line 1,")]
    assert upward and upward[0].endswith("imports selfcrag.graph (layer 11 selfcrag.graph)")
