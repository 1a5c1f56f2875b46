"""The CLI contract, run as a user runs it (a subprocess of the installed entry point)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "selfcrag.cli"]


def run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def test_ask_json_contract():
    proc = run("ask", "How many days do I have to return an item?", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {"answer", "citations", "decision", "confidence", "scores", "trace", "llm_calls"} <= set(out)
    assert out["decision"] in ("answer", "answer_with_caveat")
    assert all({"doc_id", "title", "source", "quote"} <= set(c) for c in out["citations"])
    assert all("node" in step for step in out["trace"])


def test_ask_text_with_trace():
    proc = run("ask", "How many days do I have to return an item?", "--trace")
    assert proc.returncode == 0, proc.stderr
    assert "Decision:" in proc.stdout and "Confidence:" in proc.stdout
    assert "Trace:" in proc.stdout and "first_draft" in proc.stdout


def test_ingest_jsonl_then_ask(tmp_path: Path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps({"id": "tides", "title": "Tides", "text": "The harbour of Quellport has two high tides a day. "
                    "The highest tide of the year reaches 7.5 metres in March."}) + "\n"
        + json.dumps({"id": "bridges", "title": "Bridges", "text": "Quellport has four bridges over the river Amsel."})
        + "\n",
        encoding="utf-8",
    )
    index = tmp_path / "index"
    proc = run("ingest", str(corpus), "--index", str(index))
    assert proc.returncode == 0, proc.stderr
    assert "2 documents" in proc.stdout
    proc = run("ask", "How many bridges does Quellport have?", "--index", str(index), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert "four" in out["answer"]
    assert out["citations"][0]["doc_id"] == "bridges"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("ask", "   "), "question is empty"),
        (("ask", "What?", "--index", "/nonexistent/index"), "no index"),
        (("ingest", "/nonexistent/file.md", "--index", "/tmp/x"), "/nonexistent/file.md"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(args, message):
    proc = run(*args)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_unreadable_jsonl_line_is_reported(tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "ok"}\n{not json}\n', encoding="utf-8")
    proc = run("ingest", str(bad), "--index", str(tmp_path / "i"))  # the bad line is skipped, the rest indexed
    assert proc.returncode == 0 and "indexed 1 documents" in proc.stdout
    assert "bad.jsonl:2: invalid JSON" in proc.stderr and "Traceback" not in proc.stderr


def test_domain_and_risk_move_the_decision():
    question = "How long do refunds take?"  # a right answer among alike passages: a middling confidence
    general = json.loads(run("ask", question, "--json").stdout)
    medical = json.loads(run("ask", question, "--json", "--domain", "medical", "--risk", "critical").stdout)
    strictness = ["answer", "answer_with_caveat", "abstain"]
    assert strictness.index(medical["decision"]) > strictness.index(general["decision"])  # a higher bar
    assert medical["quality"]["thresholds"]["confidence"] == 0.95  # cost 3: floor 0.75, + band 0.15, + critical 0.05
    # An answer was found; the floor withheld it, and the abstention says that (not that the evidence lacked it).
    floor = (f"the answer found has a confidence of {medical['confidence']:.2f}, below the medical domain's floor of "
             "0.80")  # the plain-answer minimum 0.95 less the caveat band 0.15
    assert medical["answer"] == f"I can't answer this with enough confidence: {floor}." and medical["missing"] == floor
    assert run("ask", question, "--domain", "astrology").returncode == 2  # argparse names the choices


def test_ask_takes_run_settings_with_set_as_eval_does():
    proc = run("ask", "How many days do I have to return an item?", "--json", "--set", "k=2", "--set",
               "max_retrieval_rounds=1")
    assert proc.returncode == 0, proc.stderr
    (retrieve,) = [step for step in json.loads(proc.stdout)["trace"] if step["node"] == "retrieve"]
    assert retrieve["decision"] == "2 passages" and retrieve["reason"].startswith("round 1/1,")
    for given, message in (("k", "--set takes NAME=VALUE, got 'k'"), ("nope=1", "nope: no such setting"),
                           ("k=99", "k=99 is above its cap, cap_k=20")):
        proc = run("ask", "What?", "--set", given)
        assert proc.returncode != 0 and message in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
