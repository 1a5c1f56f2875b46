"""`selfcrag eval` as a user runs it: the real CLI in a subprocess over an index built by `selfcrag ingest` from the
bundled sample, then the report page loaded in headless Chromium as a person would see it."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer
from support.replies import Plausible

from selfcrag.evaluation.metrics import ANSWERED, metrics
from selfcrag.evaluation.questions import contains_gold
from selfcrag.quality.calibration import shipped

pytestmark = pytest.mark.system  # `selfcrag eval` processes and headless Chromium

CLI = [sys.executable, "-m", "selfcrag.cli"]
SAMPLE_KB = Path(__file__).resolve().parents[2] / "src" / "selfcrag" / "data" / "sample_kb"
SAMPLE_QUESTIONS = Path(__file__).resolve().parents[1] / "data" / "sample_questions.jsonl"
PICKED = (0, 5, 8, 14, 18, 22, 26, 27, 28, 29)  # six answerable questions, then four the sample cannot answer
RECORD_KEYS = {"id", "system", "question", "answer", "decision", "confidence", "correct", "answered", "is_impossible",
               "latency_ms", "cpu_ms", "llm_calls", "tokens", "signals", "detail"}


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample questions in the datasets' format, and an index of the sample knowledge base."""
    root = tmp_path_factory.mktemp("eval")
    rows = [json.loads(line) for line in SAMPLE_QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    with (root / "questions.jsonl").open("w", encoding="utf-8") as sink:
        for i in PICKED:
            row = rows[i]
            sink.write(json.dumps({"id": f"sample-{i}", "question": row["question"],
                                   "answers": [row["answer"]] if row["answerable"] else [],
                                   "is_impossible": not row["answerable"],
                                   "context_title": row["doc_id"] or "",
                                   **({"context_id": row["doc_id"]} if row["doc_id"] else {})}) + "\n")  # fmt: skip
    proc = run("ingest", str(SAMPLE_KB), "--index", str(root / "index"))
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.fixture(scope="module")
def evaluated(workspace: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = workspace / "out"
    proc = run("eval", str(workspace / "questions.jsonl"), "--index", str(workspace / "index"), "--baseline", "plain",
               "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_records_and_metrics(evaluated):
    out, proc = evaluated
    records = [json.loads(line) for line in (out / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == 2 * len(PICKED)
    assert {r["system"] for r in records} == {"selfcrag", "plain"}
    for r in records:
        assert set(r) >= RECORD_KEYS, RECORD_KEYS - set(r)
        assert "error" not in r, r["error"]
        assert r["answered"] == (r["decision"] in ANSWERED)
        # y of the notes: only an answer shown to an answerable question can be right.
        if r["is_impossible"] or not r["answered"]:
            assert r["correct"] is False
        if r["system"] == "plain":
            shown_right = r["answered"] and not r["is_impossible"] and contains_gold(r["answer"], r["answers"])
            assert r["correct"] == shown_right
            assert r["confidence"] == max(r["signals"]["retrieval_top"], default=0.0)  # its best retrieval score
        else:
            assert {"context_relevance", "groundedness", "answer_relevance"} == set(r["scores"])
            assert r["signals"]["retrieval_rounds"] >= 1 and r["trace"][0]["node"] == "prepare"
            assert "messages" not in r["detail"]
        assert r["latency_ms"] > 0 and r["cpu_ms"] >= 0
        # The answerable questions name the sample document that answers them: hit@k is measured there only.
        assert ("gold_hit" in r) == (not r["is_impossible"])
    first = {r["system"]: r for r in records if r["id"] == "sample-0"}
    assert first["selfcrag"]["correct"] and first["plain"]["correct"]  # "30 days from the date of delivery"

    written = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    selective = written["run"]["selective_plain"]  # the floor fitted on tuning data, at the general preset's cost
    assert selective["from"] == "data/selective_plain.json" and selective["cost"] == 0.75
    recomputed = metrics(records, selective["floor"])
    assert written["systems"] == json.loads(json.dumps(recomputed["systems"]))  # recomputed from the records
    assert written["differences_to_plain"] == json.loads(json.dumps(recomputed["differences_to_plain"]))
    assert set(written["systems"]) == {"selfcrag", "plain", "selective_plain"}
    for name in ("selfcrag", "selective_plain"):
        for measure, row in written["differences_to_plain"][name].items():
            assert row["low"] <= row["difference"] <= row["high"], (name, measure, row)
    assert written["systems"]["selective_plain"]["llm_calls"] == written["systems"]["plain"]["llm_calls"]
    assert written["run"]["backend"] == "offline" and written["run"]["questions"] == len(PICKED)
    for name in ("selfcrag", "plain"):
        summary = written["systems"][name]
        assert (summary["answerable"], summary["unanswerable"]) == (6, 4)
        assert {"auroc", "aurc", "ece", "coverage_at_risk", "latency_ms", "cpu_ms", "precision_when_answered"} <= set(
            summary)
        assert {"coverage", "right", "wrong", "effective_reliability", "risk_at_coverage", "hit_at_k"} <= set(summary)
        assert summary["right"] + summary["wrong"] == round(summary["coverage"] * len(PICKED))
        right, wrong = summary["right"], summary["wrong"]
        assert summary["effective_reliability"] == {"0": right / 10, "1": (right - wrong) / 10,
                                                    "3": (right - 3 * wrong) / 10}
        assert summary["right_drafts"] >= summary["right"] and summary["drafted"] >= summary["right"]
        assert summary["hit_at_k"] > 0.5  # the sample's own questions: retrieval finds their document
    assert set(written["ratios"]) == {"unanswerable_answered", "right_shown", "right_drafts", "latency_p50",
                                      "latency_p95", "cpu_p50"}
    assert "answerable accuracy" in proc.stdout and "selfcrag" in proc.stdout
    # Not a terminal: no bar (its carriage returns would fill a log), one closing line with the rate instead.
    assert re.search(r"^eval: 10 questions in [\d.]+ s, [\d.]+ q/s$", proc.stderr, re.M), proc.stderr[-500:]
    assert "\r" not in proc.stderr


def _chromium() -> str | None:
    return next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)  # fmt: skip


# Counted synchronously in the load event (every inline image has loaded by then, and a broken one has no natural
# width): an `await` here let --dump-dom run first on a busy machine, and the count was missing.
PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  document.body.dataset.decoded = images.filter((img) => img.complete && img.naturalWidth > 0).length;
});
</script></body>"""


def test_report_renders_in_a_headless_browser(evaluated, tmp_path: Path):
    out, _ = evaluated
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count('<img src="data:image/png;base64,') == 5  # one file: every plot inline
    assert "<td class=win>" in page  # who wins each row
    assert "effective reliability Φ1" in page and "effective reliability Φ3" in page
    assert "AUROC of confidence among answers shown" in page and "AUROC of confidence among drafts" in page
    assert "<th>difference to plain</th><th>selfcrag</th><th>selective_plain</th>" in page  # with intervals
    # The per-question table: every question once, with both systems' decisions under it.
    table = page.split("<h2>Per question</h2>", 1)[1]
    assert table.count("<td rowspan=2>") == 2 * len(PICKED)
    assert table.count("<td>selfcrag</td>") == table.count("<td>plain</td>") == len(PICKED)
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium binary on this machine (.ci/run installs it): the page was not rendered")
    flags = ["--headless", "--disable-gpu", "--window-size=1280,2000", *(["--no-sandbox"] if os.geteuid() == 0 else [])]
    probe = tmp_path / "probe.html"  # the report plus a script that counts images the browser decoded
    probe.write_text(page.replace("</body>", PROBE), encoding="utf-8")
    dom = subprocess.run([browser, *flags, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=180)  # fmt: skip
    assert 'data-decoded="5"' in dom.stdout, dom.stderr[-1000:]
    assert dom.stdout.count("<img") == 5 and "answerable accuracy" in dom.stdout
    assert "Per question" in dom.stdout and "How many days do I have to return an item?" in dom.stdout

    shot = tmp_path / "report.png"
    proc = subprocess.run([browser, *flags, f"--screenshot={shot}", (out / "report.html").as_uri()],
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert shot.is_file(), proc.stderr[-1000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1280, 2000)
    # A blank page of this size compresses to a few kilobytes; text, a table and four plots do not.
    assert len(data) > 60_000, len(data)


def test_model_backend_runs_both_systems_on_the_model(workspace: Path):
    """Both systems take the model backend's components: plain asks the same chat model with the generation prompt."""
    out = workspace / "model-out"
    with OpenAIServer(Plausible().responder()) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
        proc = run("eval", str(workspace / "questions.jsonl"), "--index", str(workspace / "index"), "--baseline",
                   "plain", "--limit", "2", "--out", str(out), env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    written = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert written["run"]["backend"] == "model"
    records = [json.loads(line) for line in (out / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    plain = [r for r in records if r["system"] == "plain"]
    ours = [r for r in records if r["system"] == "selfcrag"]
    assert [r["llm_calls"] for r in plain] == [1, 1] and all(r["tokens"] > 0 for r in plain)
    assert all(r["llm_calls"] > 1 for r in ours)  # graders and checks on top of the generation
    assert sum(r["llm_calls"] for r in records) == len(server.requests)


def test_bad_input_is_one_line(workspace: Path, tmp_path: Path):
    questions, index = str(workspace / "questions.jsonl"), str(workspace / "index")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "question": "Q?", "answers": ["a"], "is_impossible": false}\n{oops}\n')
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "records.jsonl").write_text("{}\n")
    cases = [
        (("eval", str(bad), "--index", index), "bad.jsonl:2: invalid JSON"),
        (("eval", questions, "--index", str(tmp_path / "none")), "no index"),
        (("eval", questions, "--index", index, "--out", str(taken)), "already holds an evaluation"),
        (("eval", questions, "--index", index, "--limit", "-1"), "--limit"),
        (("eval", questions, "--index", index, "--resume"), "--resume continues the evaluation in --out"),
        (("eval", questions, "--index", index, "--set", "grading"), "--set takes NAME=VALUE, got 'grading'"),
        (("eval", questions, "--index", index, "--set", "grading=sideways"), "grading: Input should be"),
    ]
    for args, message in cases:
        proc = run(*args)
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert (taken / "records.jsonl").read_text() == "{}\n"  # an earlier evaluation is never overwritten


def test_without_the_eval_extra_says_what_to_install(workspace: Path, tmp_path: Path):
    # A matplotlib that cannot be imported, as on an install without the extra.
    (tmp_path / "matplotlib").mkdir()
    (tmp_path / "matplotlib" / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = run("eval", str(workspace / "questions.jsonl"), "--index", str(workspace / "index"), env=env)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        "selfcrag: error: selfcrag eval needs matplotlib: pip install 'selfcrag[eval]'"]


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_resume_runs_only_what_an_interruption_left_undone(workspace: Path, tmp_path: Path):
    """A run killed mid-write (kill -9: the last line torn) and resumed measures each missing (question, system)
    pair once, keeps every record it had, and computes metrics and the report over all of them."""
    out = tmp_path / "out"
    common = ("eval", str(workspace / "questions.jsonl"), "--index", str(workspace / "index"), "--baseline", "plain",
              "--out", str(out))  # fmt: skip
    first = run(*common, "--limit", "2")
    assert first.returncode == 0, first.stderr
    written = lines(out / "records.jsonl")
    assert [json.loads(line)["system"] for line in written] == ["selfcrag", "plain", "selfcrag", "plain"]
    # The second question's selfcrag record survives, its plain one was being written when the process died.
    kept = written[:3]
    (out / "records.jsonl").write_bytes(b"".join(kept) + written[3][: len(written[3]) // 2])

    resumed = run(*common, "--limit", "3", "--resume")  # the third question is new
    assert resumed.returncode == 0, resumed.stderr
    torn = [line for line in resumed.stderr.splitlines() if "torn" in line]
    assert len(torn) == 1 and "dropped the torn last line" in torn[0], resumed.stderr
    after = lines(out / "records.jsonl")
    assert after[:3] == kept  # what was measured is kept as it was, not measured again
    records = [json.loads(line) for line in after]
    ids = [f"sample-{i}" for i in PICKED[:3]]
    assert sorted((r["id"], r["system"]) for r in records) == sorted(
        (i, system) for i in ids for system in ("selfcrag", "plain"))  # each pair exactly once
    assert [(r["id"], r["system"]) for r in records[3:]] == [(ids[1], "plain"), (ids[2], "selfcrag"), (ids[2], "plain")]
    assert all(r["commit"] == records[0]["commit"] for r in records)  # each record names the code that measured it

    metrics_file = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    floor = metrics_file["run"]["selective_plain"]["floor"]
    assert metrics_file["systems"] == json.loads(json.dumps(metrics(records, floor)["systems"]))  # all, not the new
    assert metrics_file["run"]["questions"] == 3 and metrics_file["run"]["records_resumed"] == 3
    assert metrics_file["run"]["commits"] == [records[0]["commit"]]
    assert metrics_file["run"]["baseline"] == "plain" and metrics_file["run"]["backend"] == "offline"
    assert (out / "report.html").read_text(encoding="utf-8").split("<h2>Per question</h2>", 1)[1].count(
        "<td>selfcrag</td>") == 3
    # Off a terminal the closing line counts this session's questions: the second (plain only) and the third.
    assert re.search(r"^eval: 2 questions in", resumed.stderr, re.M), resumed.stderr[-500:]

    again = run(*common, "--limit", "3", "--resume")  # nothing left to measure: nothing runs, nothing is added
    assert again.returncode == 0, again.stderr
    assert lines(out / "records.jsonl") == after


def test_resume_with_other_settings_is_refused(workspace: Path, tmp_path: Path):
    """Records of one question file, backend or baseline are never mixed with another's: the resume is refused in
    one line and the folder is left byte for byte as it was (the torn line too)."""
    out = tmp_path / "out"
    questions, index = workspace / "questions.jsonl", str(workspace / "index")
    first = run("eval", str(questions), "--index", index, "--baseline", "plain", "--limit", "1", "--out", str(out))
    assert first.returncode == 0, first.stderr
    records = out / "records.jsonl"
    records.write_bytes(records.read_bytes() + b'{"id": "sample-5", "sys')  # torn by a kill
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    other = tmp_path / "other.jsonl"
    other.write_text(questions.read_text(encoding="utf-8").replace("return an item", "return a thing"),
                     encoding="utf-8")
    damaged = tmp_path / "damaged"
    shutil.copytree(out, damaged)
    body = (damaged / "records.jsonl").read_bytes().splitlines(keepends=True)
    (damaged / "records.jsonl").write_bytes(body[0] + b"{oops}\n" + b"".join(body[1:]))
    damaged_before = (damaged / "records.jsonl").read_bytes()
    changed = tmp_path / "changed"  # a run with a setting changed: resumed without it, it is refused too
    made = run("eval", str(questions), "--index", index, "--baseline", "plain", "--limit", "1", "--out",
               str(changed), "--set", "max_retrieval_rounds=2")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert json.loads((changed / "run.json").read_text())["settings"] == {"max_retrieval_rounds": "2"}
    # The model backend is only named: the refusal comes before any question runs, so no server is needed.
    model_env = {**os.environ, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    scoring = tmp_path / "scored.json"  # the same fit, saying it may show ungrounded drafts: another measurement
    scoring.write_text(json.dumps({**json.loads(shipped("offline").read_text(encoding="utf-8")),
                                   "ungrounded_drafts": "scored"}), encoding="utf-8")  # fmt: skip
    cases = [
        ((str(other), "--baseline", "plain", "--out", str(out)), None, "questions_sha256"),
        ((str(questions), "--out", str(out)), None, "baseline 'plain' there, '' now"),
        ((str(questions), "--baseline", "plain", "--out", str(out), "--model", "openai:other"), model_env,
         "backend 'offline' there, 'model' now"),
        ((str(questions), "--baseline", "plain", "--out", str(damaged)), None, "records.jsonl line 2 is not a record"),
        ((str(questions), "--baseline", "plain", "--out", str(out)),
         {**os.environ, "SELFCRAG_CALIBRATION": str(scoring)}, "calibration_sha256"),
        ((str(questions), "--baseline", "plain", "--out", str(out), "--set", "max_retrieval_rounds=2"), None,
         "settings None there, {'max_retrieval_rounds': '2'} now"),
        ((str(questions), "--baseline", "plain", "--out", str(changed)), None,
         "settings {'max_retrieval_rounds': '2'} there, None now"),
    ]  # fmt: skip
    for args, env, message in cases:
        proc = run("eval", args[0], "--index", index, "--limit", "1", "--resume", *args[1:], env=env)
        assert proc.returncode != 0, proc.stdout
        assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "Traceback" not in proc.stderr
        assert "cannot resume" in proc.stderr and message in proc.stderr, proc.stderr
        assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    assert (damaged / "records.jsonl").read_bytes() == damaged_before
