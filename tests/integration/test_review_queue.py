"""The review queue: a doubtful answer is held (never shown), listed by `selfcrag review list`, and approved,
edited or rejected from the CLI or Python, after which its thread holds the reviewed answer — on SQLite and on a
real PostgreSQL, for 20 concurrent runs, and on the LangGraph server through langgraph_sdk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from langgraph_sdk import get_sync_client
from support.langgraph_server import ROOT, langgraph_dev

from selfcrag import ask
from selfcrag.store import reviews, runs
from selfcrag.threads import config, persistent, resolve_review

CLI = [sys.executable, "-m", "selfcrag.cli"]
QUESTIONS = [json.loads(line) for line in (ROOT / "tests" / "data" / "sample_questions.jsonl")
             .read_text(encoding="utf-8").splitlines() if line.strip()]  # fmt: skip
WHO = "Who founded Parcelly?"  # the sample answers with an unrelated sentence: held for review
DRAFT = "Parcelly Membership is our subscription service. [doc_2]"  # plain's draft: the passage retrieved second
AWAITS = "This answer awaits review by a person"
# Confidence thresholds no answer reaches: every drafted answer goes to review.
REVIEW_EVERY_ANSWER = {"human_review": True, "min_confidence": 1.0, "caveat_band": 0.0}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, env=dict(os.environ))


def final_answer(thread: str) -> str:
    state = persistent().get_state(config(thread))
    assert not state.interrupts and not state.next
    return state.values["answer"]


def test_a_held_answer_is_listed_and_approved_from_the_cli(store_url):
    paused = cli("ask", WHO, "--review", "--json")
    assert paused.returncode == 0, paused.stderr
    out = json.loads(paused.stdout)
    assert out["decision"] == "human_review" and out["answer"].startswith(AWAITS)
    assert DRAFT not in paused.stdout  # not in the answer, and not in the trace either: it waits for the reviewer
    assert out["citations"] == [] and out["review"] == {"id": out["thread_id"], "status": "pending"}

    listed = cli("review", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (item,) = json.loads(listed.stdout)
    assert (item["id"], item["question"], item["draft"]) == (out["thread_id"], WHO, DRAFT)
    assert set(item["scores"]) == {"context_relevance", "groundedness", "answer_relevance"}
    assert "spread" in item["reason"] and item["age_seconds"] >= 0 and item["confidence"] > 0

    approved = cli("review", "approve", item["id"])
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.startswith(DRAFT) and "Decision: answer" in approved.stdout
    assert final_answer(item["id"]) == DRAFT
    assert json.loads(cli("review", "list", "--json").stdout) == []
    again = cli("review", "approve", item["id"])
    assert again.returncode != 0 and "approved, not pending" in again.stderr and "Traceback" not in again.stderr


def test_an_edit_from_the_cli_becomes_the_threads_answer(store_url):
    out = json.loads(cli("ask", WHO, "--review", "--json", "--thread", "edit-me").stdout)
    assert out["review"]["id"] == "edit-me"
    shown = cli("review", "show", "edit-me")
    assert WHO in shown.stdout and DRAFT in shown.stdout and "Why:" in shown.stdout
    edited = cli("review", "edit", "edit-me", "--answer", "The founders are not in the knowledge base.")
    assert edited.returncode == 0, edited.stderr
    assert final_answer("edit-me") == "The founders are not in the knowledge base."
    assert reviews.get("edit-me")["status"] == "edited"
    (record,) = runs.recent(0)
    assert (record["decision"], record["reviewed"], record["thread_id"]) == ("answer", "edit", "edit-me")


def test_a_rejection_abstains_and_bad_review_commands_are_one_line(store_url):
    held = ask(WHO, context={"human_review": True})
    assert held["answer"].startswith(AWAITS)
    done = resolve_review(held["thread_id"], "reject", note="unrelated sentence")
    assert done["decision"] == "abstain" and done["answer"].startswith("I don't know")
    assert reviews.get(held["thread_id"])["note"] == "unrelated sentence"
    for args, message in ((("review", "show", "nope"), "no review 'nope'"),
                          (("review", "approve", "nope"), "no review 'nope'")):  # fmt: skip
        proc = cli(*args)
        assert proc.returncode != 0 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_every_review_command_on_a_case_whose_thread_has_gone_is_one_line(store_url):
    ask(WHO, context={"human_review": True}, thread_id="gone")
    persistent().checkpointer.delete_thread("gone")  # its asker, or a cleanup, deleted the thread
    said = []
    for action in (("approve",), ("edit", "--answer", "Edited."), ("reject",)):
        proc = cli("review", *action, "gone")
        assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""
        said.append(proc.stderr.strip())
    assert said[0] == "selfcrag: error: review gone: its thread is gone (deleted); nothing to decide (marked stale)"
    assert said[1:] == ["selfcrag: error: review gone is stale, not pending"] * 2
    assert reviews.get("gone")["status"] == "stale" and cli("review", "show", "gone").returncode == 0


def test_a_new_question_on_a_thread_awaiting_review_is_refused_and_the_review_kept(store_url):
    ask(WHO, context={"human_review": True}, thread_id="busy")
    proc = cli("ask", "How many days do I have to return an item?", "--thread", "busy")
    assert proc.returncode != 0 and "awaiting review" in proc.stderr and "Traceback" not in proc.stderr
    assert [r["id"] for r in reviews.pending()] == ["busy"]


def test_twenty_concurrent_runs_lose_no_record_and_no_review(store_url):
    questions = [q["question"] for q in QUESTIONS[:20]]
    with ThreadPoolExecutor(max_workers=20) as pool:
        outputs = list(pool.map(lambda q: ask(q, context=REVIEW_EVERY_ANSWER), questions))
    held = [o for o in outputs if o["decision"] == "human_review"]
    # Every drafted answer is held; a run with no answer the evidence supports abstains without a review.
    assert {o["decision"] for o in outputs} <= {"human_review", "abstain"} and len(held) >= 16
    assert sorted(r["id"] for r in reviews.pending()) == sorted(h["thread_id"] for h in held)
    with ThreadPoolExecutor(max_workers=20) as pool:
        done = list(pool.map(lambda h: resolve_review(h["thread_id"], "approve"), held))
    assert all(d["decision"] == "answer" for d in done) and reviews.pending() == []
    records = runs.recent(0)
    assert sorted(r["question"] for r in records) == sorted(questions)
    reviewed = {r["thread_id"] for r in records if (r["decision"], r["reviewed"]) == ("answer", "approve")}
    assert reviewed == {h["thread_id"] for h in held}


def test_the_server_holds_the_draft_in_an_interrupted_thread_and_records_the_reviewed_run(tmp_path):
    home = tmp_path / "home"
    with langgraph_dev({"SELFCRAG_HOME": str(home)}) as url:
        client = get_sync_client(url=url)
        (assistant,) = client.assistants.search(graph_id="selfcrag")
        thread = client.threads.create()["thread_id"]
        paused = client.runs.wait(thread, assistant["assistant_id"], input={"question": WHO},
                                  context={"human_review": True})  # fmt: skip
        assert paused["decision"] == "human_review" and paused["answer"].startswith(AWAITS)
        (waiting,) = [t for t in client.threads.search(status="interrupted") if t["thread_id"] == thread]
        (interrupt,) = client.threads.get_state(waiting["thread_id"])["interrupts"]
        assert interrupt["value"]["draft_answer"] == DRAFT and "spread" in interrupt["value"]["reason"]
        done = client.runs.wait(thread, assistant["assistant_id"], command={"resume": {"action": "approve"}})
        assert done["answer"] == DRAFT and done["decision"] == "answer"
    monitor = subprocess.run([*CLI, "monitor", "--json"], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "SELFCRAG_HOME": str(home)})  # fmt: skip
    assert monitor.returncode == 0, monitor.stderr
    assert json.loads(monitor.stdout)["decisions"] == {"answer": 1}


@pytest.fixture(autouse=True)
def _review_env(monkeypatch):
    monkeypatch.delenv("SELFCRAG_HUMAN_REVIEW", raising=False)
