"""`selfcrag calibrate` as a user runs it: the real CLI in a subprocess fits confidence on labelled questions over the
bundled sample knowledge base, writes a file with provenance, and `selfcrag ask` uses it; a calibration file that
cannot serve is one line before any run."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "selfcrag.cli"]
SAMPLE_KB = Path(__file__).resolve().parents[2] / "src" / "selfcrag" / "data" / "sample_kb"
SAMPLE_QUESTIONS = Path(__file__).resolve().parents[1] / "data" / "sample_questions.jsonl"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, **(env or {})})  # fmt: skip


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """Every sample question, labelled in the datasets' format, fitted over an index built from the sample folder."""
    root = tmp_path_factory.mktemp("calibrate")
    rows = [json.loads(line) for line in SAMPLE_QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = root / "labelled.jsonl"
    questions.write_text("".join(json.dumps({
        "id": f"sample-{i}", "question": row["question"], "answers": [row["answer"]] if row["answerable"] else [],
        "is_impossible": not row["answerable"], "context_title": row["doc_id"] or ""}) + "\n"
        for i, row in enumerate(rows)), encoding="utf-8")  # fmt: skip
    out = root / "mine.json"
    proc = run("calibrate", str(questions), "--index", str(root / "index"), "--corpus", str(SAMPLE_KB), "--out",
               str(out))
    return questions, out, proc


def test_calibrate_fits_and_writes_a_file_with_provenance(fitted):
    questions, out, proc = fitted
    assert proc.returncode == 0, proc.stderr
    assert "before (current confidence)" in proc.stdout and "after (this fit)" in proc.stdout
    assert f"wrote {out}" in proc.stdout
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["model"]["features"] and len(data["model"]["weights"]) == len(data["model"]["features"])
    origin = data["provenance"]
    assert origin["data"][0] == {"file": "labelled.jsonl",
                                 "sha256": hashlib.sha256(questions.read_bytes()).hexdigest()}
    assert origin["questions"] == 38 and origin["backend"] == "offline" and origin["date"]
    cv = data["cross_validation"]
    assert cv["questions"] == 38 and 0 < cv["right"] < cv["drafted"] and cv["after"]["auroc"] is not None


def test_ask_uses_the_fitted_file_and_refuses_a_bad_one(fitted, tmp_path):
    _, out, proc = fitted
    assert proc.returncode == 0, proc.stderr
    mine = run("ask", "How many days do I have to return an item?", "--json",
               env={"SELFCRAG_CALIBRATION": str(out)})
    assert mine.returncode == 0, mine.stderr
    explained = json.loads(mine.stdout)["confidence_explanation"]
    assert explained["calibration"] == "mine.json" and "calibration_error" not in explained
    broken = tmp_path / "broken.json"
    broken.write_text('{"model": {"features": ["shoe_size"]}}', encoding="utf-8")
    for path, fault in ((tmp_path / "absent.json", "No such file"), (broken, "not a selfcrag calibration")):
        refused = run("ask", "How many days do I have to return an item?", env={"SELFCRAG_CALIBRATION": str(path)})
        assert refused.returncode != 0 and refused.stdout == ""
        [line] = refused.stderr.strip().splitlines()  # one line, no traceback
        assert line.startswith("selfcrag: error:") and str(path) in line and fault in line
        assert "SELFCRAG_CALIBRATION" in line  # says where the setting came from


def test_too_few_questions_or_a_folder_for_out_is_one_line(tmp_path, fitted):
    questions, _, _ = fitted
    few = tmp_path / "few.jsonl"
    few.write_text("".join(questions.read_text(encoding="utf-8").splitlines(keepends=True)[:5]), encoding="utf-8")
    index = str(questions.parent / "index")
    proc = run("calibrate", str(few), "--index", index, "--out", str(tmp_path / "x.json"))
    *progress, line = proc.stderr.strip().splitlines()  # progress lines, then one line for the fault
    assert proc.returncode != 0 and line.startswith("selfcrag: error: need at least 20 questions with a draft")
    assert all(p.startswith("calibrate: ") for p in progress) and not (tmp_path / "x.json").exists()
    folder = run("calibrate", str(few), "--index", index, "--out", str(tmp_path))
    assert folder.returncode != 0 and "is a directory" in folder.stderr


def test_a_fit_for_scored_ungrounded_drafts_says_so_and_serves(fitted, tmp_path):
    questions, _, _ = fitted
    out = tmp_path / "scored.json"
    proc = run("calibrate", str(questions), "--index", str(questions.parent / "index"), "--out", str(out),
               "--ungrounded-drafts", "scored")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["ungrounded_drafts"] == "scored" and "--ungrounded-drafts scored" in data["provenance"]["command"]
    asked = run("ask", "How many days do I have to return an item?", "--json", env={"SELFCRAG_CALIBRATION": str(out)})
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["confidence_explanation"]["calibration"] == "scored.json"
