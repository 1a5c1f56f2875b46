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


def test_vector_scale_runs_small_and_marks_the_shipped_build(tmp_path):
    out = tmp_path / "vector_scale.json"
    done = script(str(BENCHMARKS / "vector_scale.py"), "--sizes", "3000", "--queries", "20", "--builds", "16:20,32:64",
                  "--search-depths", "16,64", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = json.loads(out.read_text())["rows"]
    assert row["chunks"] == 3000 and [b["shipped"] for b in row["builds"]] == [False, True]
    for build in row["builds"]:
        assert [s["efSearch"] for s in build["searches"]] == [16, 64]
        assert all(0.0 <= s["recall_at_10"] <= 1.0 for s in build["searches"])
    assert row["builds"][1]["searches"][1]["recall_at_10"] > 0.9  # a deep search of a small clustered set


def test_chinese_tokenisation_runs(tmp_path):
    """The sample only (a few seconds of CPU): it broke unseen when BM25 moved to arrays (`postings` went away)."""
    out = tmp_path / "chinese_tokenisation.json"
    done = script(str(BENCHMARKS / "chinese_tokenisation.py"), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert {"characters", "character pairs"} <= set(result["tokenisers"]), result["tokenisers"].keys()
    assert all(row["vocabulary"] > 0 for row in result["tokenisers"].values())


def test_eval_datasets_keeps_a_model_run_apart_and_resumes_it(tmp_path):
    """`--model` writes eval_<set>_<model>/ beside the offline eval_<set>/, never over it; `--resume` continues an
    interrupted model run there instead of replacing the folder. A set in the datasets' layout, made of the sample
    knowledge base and its questions, stands in for HotpotQA."""
    from support.openai_server import OpenAIServer
    from support.replies import Plausible

    datasets, results = tmp_path / "datasets", tmp_path / "results"
    (datasets / "hotpotqa").mkdir(parents=True)
    kb = ROOT / "src" / "selfcrag" / "data" / "sample_kb"
    (datasets / "hotpotqa" / "dev_distractor_100_corpus.jsonl").write_text("".join(
        json.dumps({"id": doc.stem, "title": doc.stem, "text": doc.read_text(encoding="utf-8")}) + "\n"
        for doc in sorted(kb.glob("*.md"))), encoding="utf-8")  # fmt: skip
    rows = [json.loads(line) for line in (ROOT / "tests" / "data" / "sample_questions.jsonl").read_text().splitlines()]
    (datasets / "hotpotqa" / "dev_distractor_100.jsonl").write_text("".join(
        json.dumps({"id": f"q{i}", "question": row["question"], "answers": [row["answer"]] if row["answerable"] else [],
                    "is_impossible": not row["answerable"]}) + "\n" for i, row in enumerate(rows[:3])),
        encoding="utf-8")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(tmp_path)}  # its index cache stays here
    command = [sys.executable, str(BENCHMARKS / "eval_datasets.py"), "hotpotqa", "--datasets", str(datasets),
               "--results", str(results), "--limit", "2"]  # fmt: skip

    def bench(*extra: str, base_url: str = "") -> None:
        done = subprocess.run([*command, *extra], capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
                              env={**env, **({"OPENAI_BASE_URL": base_url} if base_url else {})})  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]

    bench()
    offline = {p.name: p.read_bytes() for p in (results / "eval_hotpotqa").iterdir()}
    with OpenAIServer(Plausible().responder()) as server:
        bench("--model", "openai:tiny-model", base_url=server.base_url)
        model_run = results / "eval_hotpotqa_openai-tiny-model"
        records = (model_run / "records.jsonl").read_bytes().splitlines(keepends=True)
        assert len(records) == 4 and json.loads((model_run / "metrics.json").read_text())["run"]["backend"] == "model"
        (model_run / "records.jsonl").write_bytes(records[0])  # interrupted after the first record
        bench("--model", "openai:tiny-model", "--resume", base_url=server.base_url)
    after = (model_run / "records.jsonl").read_bytes().splitlines(keepends=True)
    assert len(after) == 4 and after[0] == records[0]  # the kept record is not measured again
    assert sorted((json.loads(r)["id"], json.loads(r)["system"]) for r in after) == [
        ("q0", "plain"), ("q0", "selfcrag"), ("q1", "plain"), ("q1", "selfcrag")]
    run = json.loads((model_run / "metrics.json").read_text())["run"]
    assert run["records_resumed"] == 1 and run["command"].endswith("--resume") and run["commit"]
    assert {p.name: p.read_bytes() for p in (results / "eval_hotpotqa").iterdir()} == offline  # untouched


def test_ungrounded_drafts_trial_judges_the_committed_records(tmp_path):
    """Withheld against scored from the records committed under benchmarks/results (a fit each, no graph runs)."""
    out = tmp_path / "trial.json"
    done = script(str(BENCHMARKS / "ungrounded_drafts_trial.py"), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["questions"]["withheld"] == result["questions"]["scored"] > 0
    for mode in ("withheld", "scored"):
        assert set(result[mode]["sources"]) == {"squad", "halueval"}
        floor = result[mode]["sources"]["squad"]["fit_at_general_floor"]
        assert floor["right"] + floor["wrong"] <= result[mode]["sources"]["squad"]["runs"]["questions"]


def test_ungrounded_drafts_trial_reports_an_arm_too_small_to_fit(tmp_path):
    """The 1.5B's one-word hallucination check kept 19 drafts, one short of a fit: its runs are still reported."""
    out = tmp_path / "trial.json"
    results = BENCHMARKS / "results"
    done = script(str(BENCHMARKS / "ungrounded_drafts_trial.py"), "--out", str(out),
                  "--arm", f"json={results / 'calibration_fit_model1.5b_yes_no_records.jsonl'}",
                  "--arm", f"one_word={results / 'calibration_fit_model1.5b_one_word_check_records.jsonl'}")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["one_word"]["cross_validation"] is None and "need at least" in result["one_word"]["no_fit"]
    assert result["one_word"]["sources"]["squad"]["runs"]["questions"] == 30
    squad = result["json"]["sources"]["squad"]
    assert 0 < squad["runs"]["unanswerable"] <= squad["runs"]["wrong"]  # an unanswerable one answered is wrong
    assert result["json"]["cross_validation"]["auroc"] > 0


def record(qid: str, system: str, *, answered: bool, draft: str, confidence: float, impossible: bool = False):
    right = answered and not impossible and "Paris" in draft
    return {"id": qid, "system": system, "answers": [] if impossible else ["Paris"], "is_impossible": impossible,
            "answered": answered, "draft": draft, "confidence": confidence, "correct": right}


def test_floor_ceiling_finds_the_best_floor_that_keeps_the_guards(tmp_path):
    """Plain shows 3 right and 3 wrong of 6; the graph's drafts rank 3 right above 2 wrong, so the floor at 0.7 keeps
    every right draft and drops both wrong ones: Φ₁ 0.5 against plain's 0.0, the bar reachable. A folder whose graph
    drafted one right answer of plain's three cannot keep four fifths of them at any floor; its traces say why the
    other two were lost: one draft failed a rule check, the other the model's verdict."""
    folder = tmp_path / "eval_toy"
    folder.mkdir()
    rows = []
    for i, (good, confidence) in enumerate([(True, 0.9), (True, 0.8), (True, 0.7), (False, 0.6), (False, 0.5)]):
        draft = "It is Paris." if good else "It is Lyon."
        rows.append(record(f"q{i}", "selfcrag", answered=confidence >= 0.55, draft=draft, confidence=confidence))
        rows.append(record(f"q{i}", "plain", answered=True, draft=draft, confidence=0.5))
    rows += [record("q5", "selfcrag", answered=False, draft="", confidence=0.0),
             record("q5", "plain", answered=True, draft="It is Nice.", confidence=0.5)]
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lost = tmp_path / "eval_lost"
    lost.mkdir()
    checked = {"q0": [{"node": "check_hallucination", "decision": "not grounded",
                       "reason": "groundedness 0.00 (threshold 0.75); name 'Lyon' not in the evidence"}],
               "q1": [{"node": "check_hallucination", "decision": "not grounded",
                       "reason": "groundedness 0.40 (threshold 0.75); 1 unsupported statements"}]}  # fmt: skip
    (lost / "records.jsonl").write_text("".join(
        json.dumps({**r, "draft": "", "trace": checked[r["id"]]} if r["system"] == "selfcrag" and r["id"] in checked
                   else r) + "\n" for r in rows))  # fmt: skip
    out = tmp_path / "ceiling.json"
    done = script(str(BENCHMARKS / "floor_ceiling.py"), str(folder), str(lost), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    runs = json.loads(out.read_text())["runs"]
    toy, gone = runs[str(folder)], runs[str(lost)]
    assert toy["plain"] == {"right": 3, "wrong": 3, "phi_1": 0.0}
    assert toy["shown"] == {"right": 3, "wrong": 1, "phi_1": 0.333}
    assert toy["best_guarded_floor"] == {"floor": 0.7, "right": 3, "wrong": 0, "phi_1": 0.5} and toy["bar_reachable"]
    assert gone["right_drafts_vs_plain"] == 0.33 and gone["best_guarded_floor"] is None and not gone["bar_reachable"]
    assert toy["lost"] == {} and gone["lost"] == {"not grounded: model": 1, "not grounded: rules": 1}
    assert json.loads(out.read_text())["commit"]


def test_model_fit_refits_the_committed_model_records_without_the_model(tmp_path):
    records = BENCHMARKS / "results" / "model0.5b_candidates" / "eval_squad_openai-qwen2.5-coder-0.5b"
    out, results = tmp_path / "model.json", tmp_path / "fit.json"
    done = script(str(BENCHMARKS / "model_fit.py"), str(records), "--out", str(out), "--results", str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(results.read_text(encoding="utf-8"))
    assert written["commit"] and written["command"].startswith("benchmarks/model_fit.py")
    assert written["model"] == "qwen2.5-coder-0.5b" and written["fitted"]["questions"] == 120
    # Every draft a candidate: the run lost none of plain's right answers. The fit's rows leave out the drafts an
    # exact finding vetoed (here a check that timed out while recording: no check), so it may count fewer.
    metrics = json.loads((records / "metrics.json").read_text(encoding="utf-8"))["systems"]
    assert metrics["selfcrag"]["right_drafts"] >= metrics["plain"]["right"] == written["plain"]["right"]
    assert written["fitted"]["right_drafts"] <= metrics["selfcrag"]["right_drafts"]
    calibration = json.loads(out.read_text(encoding="utf-8"))
    assert calibration["ungrounded_drafts"] == "scored" and calibration["model"]["features"] == written["features"]
    # Recorded with a budget of plain's draft and its checks: nothing said about corrections, so they stay on.
    assert written["corrections"] is None and "corrections" not in calibration
    from selfcrag.quality.calibration import load

    assert load(out).features == tuple(written["features"])  # a file the graph can use
    assert written["calibration_used"] == "offline.json" and written["corrections_as_run"] is None
    # Keeping the runs' calibration writes only a corrections verdict, which these records cannot give.
    kept = script(str(BENCHMARKS / "model_fit.py"), str(records), "--keep-calibration", "--out", str(tmp_path / "k"))
    assert kept.returncode == 2 and "cannot say whether correcting pays" in kept.stderr
    assert not (tmp_path / "k").exists()
    mixed = script(str(BENCHMARKS / "model_fit.py"), str(records), str(tmp_path))  # no run.json there
    assert mixed.returncode == 2 and "one generator model" in mixed.stderr and "Traceback" not in mixed.stderr
    # Two corpora: each is also decided by the same features fitted on the other alone.
    halueval = records.parent / "eval_halueval_openai-qwen2.5-coder-0.5b"
    both = script(str(BENCHMARKS / "model_fit.py"), str(records), str(halueval), "--out", str(out), "--results",
                  str(results))  # fmt: skip
    assert both.returncode == 0, both.stderr[-2000:]
    across = json.loads(results.read_text(encoding="utf-8"))["one_folder_out"]
    assert {name: row["questions"] for name, row in across.items()} == {records.name: 120, halueval.name: 80}
    assert all(0 < row["log_loss"] < 1 and row["trained_on"] > 0 for row in across.values())


def test_corrections_verdict_decides_the_committed_offline_tuning_runs_and_writes_only_its_verdict(tmp_path):
    import shutil

    tuning = BENCHMARKS / "results" / "offline_tuning"
    folders = [str(tuning / "eval_squad"), str(tuning / "eval_halueval")]
    results = tmp_path / "verdict.json"
    done = script(str(BENCHMARKS / "corrections_verdict.py"), *folders, "--results", str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(results.read_text(encoding="utf-8"))
    assert written["commit"] and written["calibration"] == "offline.json" and written["backend"] == "offline"
    pooled = written["pooled"]["0.75"]
    assert written["verdict"] == pooled and pooled["questions"] == 700 and pooled["questions_corrected"] >= 20
    low, high = pooled["phi_difference"]["low"], pooled["phi_difference"]["high"]
    assert low <= pooled["phi_difference"]["difference"] <= high and pooled["pay"] == (
        pooled["phi_difference"]["difference"] > 0)  # fmt: skip
    # --write changes only the verdict of the file the runs used: here a copy of the tree's data, not the tree's.
    copy = tmp_path / "tree"
    shutil.copytree(BENCHMARKS, copy / "benchmarks", ignore=shutil.ignore_patterns("results"))
    shutil.copytree(ROOT / "src" / "selfcrag" / "data" / "calibration", copy / "src" / "selfcrag" / "data" /
                    "calibration")  # fmt: skip
    (copy / "benchmarks" / "results").mkdir()
    wrote = script(str(copy / "benchmarks" / "corrections_verdict.py"), *folders, "--write", "--results",
                   str(results))  # fmt: skip
    assert wrote.returncode == 0, wrote.stderr[-2000:]
    before = json.loads((ROOT / "src/selfcrag/data/calibration/offline.json").read_text(encoding="utf-8"))
    after = json.loads((copy / "src/selfcrag/data/calibration/offline.json").read_text(encoding="utf-8"))
    assert after.pop("corrections")["backend"] == "offline" and after == {k: v for k, v in before.items()
                                                                          if k != "corrections"}  # fmt: skip
    other = script(str(BENCHMARKS / "corrections_verdict.py"), folders[0], str(tmp_path))  # no records there
    assert other.returncode == 2 and "no records.jsonl" in other.stderr and "Traceback" not in other.stderr


def test_eval_replay_redecides_a_recorded_model_eval_with_no_model_request(tmp_path):
    from support.openai_server import OpenAIServer
    from support.replies import Plausible

    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"id": f"q{n}", "question": q, "answers": [a] if a else [],
                                             "is_impossible": not a}) + "\n"
                                 for n, (q, a) in enumerate([("How many days do I have to return an item?", "30"),
                                                             ("What does error E1042 mean?", "expired"),
                                                             ("Do you ship to Antarctica?", "")])),
                         encoding="utf-8")  # fmt: skip
    sample, index, recorded = ROOT / "src" / "selfcrag" / "data" / "sample_kb", tmp_path / "index", tmp_path / "rec"
    cli = [sys.executable, "-m", "selfcrag.cli"]
    assert subprocess.run([*cli, "ingest", str(sample), "--index", str(index)], capture_output=True,
                          timeout=300).returncode == 0  # fmt: skip
    with OpenAIServer(Plausible().responder()) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test"}
        done = subprocess.run([*cli, "eval", str(questions), "--index", str(index), "--baseline", "plain", "--out",
                               str(recorded), "--model", "openai:test-model", "--set", "max_llm_calls=3"],
                              capture_output=True, text=True, timeout=600, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        made = len(server.requests)
    results = tmp_path / "replay.json"
    done = script(str(BENCHMARKS / "eval_replay.py"), str(recorded), "--index", str(index), "--last", "2",
                  "--results", str(results))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(results.read_text(encoding="utf-8"))
    assert written["command"].startswith("benchmarks/eval_replay.py") and written["questions"] == 2
    assert written["model_port_connections"] == written["calls_not_recorded"] == 0
    assert written["records_as_recorded"] == written["records"] == 4 and 0 < written["calls_replayed"] <= made
    (recorded / "calls.jsonl").write_text("")  # nothing recorded: strict, the first call ends the replay in one line
    missing = script(str(BENCHMARKS / "eval_replay.py"), str(recorded), "--index", str(index), "--strict",
                     "--results", str(tmp_path / "none.json"))  # fmt: skip
    assert missing.returncode != 0 and "the replayed eval failed" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_contested_false_alarms_counts_right_drafts_the_check_would_veto(tmp_path):
    index, folder = tmp_path / "index", tmp_path / "eval_toy"
    index.mkdir()
    folder.mkdir()
    chunks = {"returns#0": "Items can be returned within 30 days. Pack the item, and drop it off within 21 days of "
                           "printing the label.",
              "vouchers#0": "Vouchers can be returned within 30 days. Vouchers can be returned within 90 days."}
    (index / "chunks.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in chunks.items()),
                                        encoding="utf-8")  # fmt: skip

    def selfcrag(qid: str, question: str, chunk: str, answer: str, gold: str) -> dict:
        trace = [{"node": "retrieve", "passages": str([{"id": chunk, "score": 0.9}])}]
        return {"id": qid, "system": "selfcrag", "question": question, "answers": [gold], "is_impossible": False,
                "trace": trace, "detail": {"candidates": [{"round": 1, "plain": True, "answer": answer}]}}

    records = [selfcrag("1", "How many days do I have to return an item?", "returns#0",
                        "Items can be returned within 30 days [doc_1].", "30"),
               selfcrag("2", "How many days do I have to return a voucher?", "vouchers#0",
                        "Vouchers can be returned within 30 days [doc_1].", "30")]  # fmt: skip
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "alarms.json"
    done = script(str(BENCHMARKS / "contested_false_alarms.py"), str(folder), "--index", str(index), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["command"].startswith("benchmarks/contested_false_alarms.py")
    assert written["folders"]["eval_toy"] == {"questions": 2, "right_drafts": 2, "right_contested": 1,
                                                   "wrong_drafts": 0, "wrong_contested": 0, "plain_right": 2,
                                                   "plain_right_contested": 1}  # fmt: skip
    assert [a["id"] for a in written["false_alarms"]] == ["2"]  # its passage gives the question two answers


@pytest.mark.system  # starts a real `langgraph dev`
def test_server_throughput_asks_both_arms_and_writes_the_ratio(tmp_path):
    out = tmp_path / "server_throughput.json"
    done = script(str(BENCHMARKS / "server_throughput.py"), "--clients", "2", "--questions", "4", "--rounds", "1",
                  "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    for arm in ("in process", "server", "server, no file persistence"):
        (row,) = result["rounds"][arm]
        assert row["questions"] == 4 and row["cpu_s"] > 0 and row["answered"] >= 2, row  # the sample's answerable ones
    assert result["server_over_in_process"] > 0 and result["unflushed_server_over_in_process"] > 0
    assert result["command"].startswith("benchmarks/server_throughput.py --clients 2")
    assert "server / in process:" in done.stdout
