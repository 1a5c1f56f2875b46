"""What a deployment sees of the project: the graphs' names (traces and Studio show them), langgraph.json's
schema, and the build context `langgraph build` sends to docker (.dockerignore)."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver

from selfcrag import build_graph, graph
from selfcrag.indexer import build_indexer
from selfcrag.indexer import graph as indexer_graph

ROOT = Path(__file__).parents[2]


def test_both_graphs_are_named_and_not_langgraphs_default():
    assert graph.name == "selfcrag"
    assert build_graph().name == "selfcrag"
    assert build_graph(checkpointer=InMemorySaver()).name == "selfcrag"  # other compile arguments keep the name
    assert build_graph(name="mine").name == "mine"  # a caller may still name its own
    assert indexer_graph.name == build_indexer().name == "selfcrag-indexer"
    assert graph.get_name() == "selfcrag"  # the name of a run's root in a trace


def test_langgraph_json_names_its_official_schema():
    config = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))
    assert config["$schema"] == "https://langgra.ph/schema.json"
    assert set(config["graphs"]) == {"selfcrag", "indexer"}


def excluded(path: str, patterns: list[str]) -> bool:
    """Whether docker leaves `path` (relative, '/'-separated) out of the build context: a pattern excludes the path
    it matches and everything under it; `*` stays within one name and a leading `**/` matches at any depth
    (docker's rules without `!` exceptions, which the file does not use)."""
    names = path.split("/")
    for pattern in (p.rstrip("/") for p in patterns):
        wanted = pattern.removeprefix("**/").split("/")
        starts = range(len(names)) if pattern.startswith("**/") else range(1)
        for start in starts:
            found = names[start : start + len(wanted)]
            if len(found) == len(wanted) and all(map(fnmatch.fnmatchcase, found, wanted)):
                return True
    return False


def test_dockerignore_keeps_the_heavy_and_private_paths_out_of_the_image():
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert not [p for p in patterns if p.startswith("!")], "the matcher here does not model exceptions"
    for heavy in (".venv/lib/python3.12/site-packages/torch/__init__.py", ".git/objects/pack/p.pack", ".env",
                  "src/selfcrag/__pycache__/graph.cpython-312.pyc", ".pytest_cache/v/cache/lastfailed",
                  ".mypy_cache/3.12/x.json", ".ruff_cache/x", "benchmarks/results/eval_squad/records.jsonl",
                  ".benchmarks/x.json", ".langgraph_api/store.pckl", "src/selfcrag.egg-info/PKG-INFO"):
        assert excluded(heavy, patterns), heavy
    for needed in ("pyproject.toml", "langgraph.json", "src/selfcrag/graph.py", "src/selfcrag/auth.py",
                   "src/selfcrag/data/presets.json", "src/selfcrag/data/sample_kb/returns_policy.md"):
        assert not excluded(needed, patterns), needed
