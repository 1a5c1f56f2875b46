"""Every benchmark results file says what wrote it: the commit, whether the tree had uncommitted changes, and the
command (benchmarks/provenance.py). A figure quoted from a file that does not is a figure nobody can re-make.

An evaluation folder (`eval_<set>/`) is one result: `selfcrag eval` writes its records.jsonl, metrics.json and
report.html (and run.json, the settings a `--resume` must match) in one run, possibly resumed over sessions, and
metrics.json's `run` block says what that run was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
RESULTS = BENCHMARKS / "results"
FIELDS = ("commit", "dirty", "command")
# Scripts that write no results file of their own: shared helpers, pg_cluster.py (starts and stops the kept
# PostgreSQL that pg_retrieval_scale.py --url measures), and squad_offline.py, which runs eval_datasets.py.
HELPERS = {"data_files.py", "pg_cluster.py", "provenance.py", "squad_offline.py"}


def records(path: Path) -> list[dict]:
    """The objects of a results file that must each carry the fields."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    body = json.loads(text)
    return [body["run"] if path.name == "metrics.json" and path.parent.name.startswith("eval_") else body]


def results_files() -> list[Path]:
    files = sorted(p for p in RESULTS.rglob("*") if p.suffix in (".json", ".jsonl"))
    # An evaluation folder's records and resume key are covered by its metrics.json (see above).
    return [p for p in files if not (p.name in ("records.jsonl", "run.json") and p.parent.name.startswith("eval_"))]


def test_there_are_results_to_check():
    assert len(results_files()) > 10
    assert all((folder / "metrics.json").is_file() for folder in RESULTS.glob("eval_*"))


@pytest.mark.parametrize("path", results_files(), ids=lambda p: str(p.relative_to(RESULTS)))
def test_each_results_file_names_its_commit_and_command(path):
    for record in records(path):
        missing = [f for f in FIELDS if f not in record]
        assert not missing, f"{path.relative_to(RESULTS)} lacks {missing}: write it with benchmarks/provenance.py"
        assert isinstance(record["commit"], str) and record["commit"].strip()
        assert isinstance(record["command"], str) and record["command"].strip()
        assert isinstance(record["dirty"], (bool, str))


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name not in HELPERS))
def test_each_benchmark_writes_its_provenance(script):
    assert "from provenance import provenance" in (BENCHMARKS / script).read_text(encoding="utf-8"), (
        f"{script} does not record what wrote its results (benchmarks/provenance.py)")
