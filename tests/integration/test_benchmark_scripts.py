"""A benchmark that cannot run on main is a failing test: every script under benchmarks/ starts and parses its
arguments (`--help` imports everything it imports at the top), and the one with a mode small enough for the test
suite runs it and writes a results file with its provenance. The rest need the evaluation sets, a model server or
PostgreSQL and minutes of CPU; their own runs are what they measure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
HELPERS = {"data_files.py", "provenance.py"}  # imported by the scripts, not run


def script(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT, check=False)  # fmt: skip


@pytest.mark.parametrize("name", sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name not in HELPERS))
def test_each_benchmark_starts(name):
    done = script(str(BENCHMARKS / name), "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_retrieval_scale_runs_small(tmp_path):
    out = tmp_path / "retrieval_scale.json"
    done = script(str(BENCHMARKS / "retrieval_scale.py"), "--sizes", "2000", "--queries", "5", "--old-up-to", "2000",
                  "--hnsw-up-to", "2000", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert [row["chunks"] for row in result["keyword"]] == [2000]
    assert {row["chunks"] for row in result["vector"]} == {2000}
    assert result["command"].startswith("benchmarks/retrieval_scale.py --sizes 2000")
    assert len(result["commit"]) == 40 and isinstance(result["dirty"], bool)


def test_chinese_tokenisation_runs(tmp_path):
    """The sample only (a few seconds of CPU): it broke unseen when BM25 moved to arrays (`postings` went away)."""
    out = tmp_path / "chinese_tokenisation.json"
    done = script(str(BENCHMARKS / "chinese_tokenisation.py"), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert {"characters", "character pairs"} <= set(result["tokenisers"]), result["tokenisers"].keys()
    assert all(row["vocabulary"] > 0 for row in result["tokenisers"].values())
