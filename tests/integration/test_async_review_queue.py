"""The review queue on the async path, as test_review_queue.py tests the sync one, on SQLite and on a real
PostgreSQL: `aask` holds a doubtful answer, `aresolve_review` approves, edits or rejects it (its thread then holds
the reviewed answer, its run record the decision), twenty concurrent runs lose no record and no review, and a
review decided in a process killed meanwhile is pending again."""

from __future__ import annotations

import asyncio
import signal
import subprocess

import pytest
from test_review_queue import AWAITS, DRAFT, QUESTIONS, REVIEW_EVERY_ANSWER, WHO, final_answer
from test_turns import STOPPED, environment, eventually, kill

from selfcrag import aask, ask
from selfcrag.errors import ReviewError, ThreadBusyError
from selfcrag.store import leases, reviews, runs
from selfcrag.threads import aresolve_review, resolve_review

REVIEW = {"human_review": True}


async def test_a_held_answer_is_queued_and_approved(store_url):
    out = await aask(WHO, REVIEW)
    assert out["decision"] == "human_review" and out["answer"].startswith(AWAITS) and DRAFT not in out["answer"]
    assert out["review"] == {"id": out["thread_id"], "status": "pending"}
    (item,) = reviews.pending()
    assert (item["id"], item["question"], item["draft"]) == (out["thread_id"], WHO, DRAFT)
    approved = await aresolve_review(item["id"], "approve")
    assert approved["answer"] == DRAFT and approved["decision"] == "answer"
    assert final_answer(item["id"]) == DRAFT and reviews.pending() == []
    with pytest.raises(ReviewError, match="approved, not pending"):
        await aresolve_review(item["id"], "approve")


async def test_an_edit_becomes_the_threads_answer_and_its_record_says_so(store_url):
    await aask(WHO, REVIEW, thread_id="edit-me")
    await aresolve_review("edit-me", "edit", answer="The founders are not in the knowledge base.")
    assert final_answer("edit-me") == "The founders are not in the knowledge base."
    assert reviews.get("edit-me")["status"] == "edited"
    (record,) = runs.recent(0)
    assert (record["decision"], record["reviewed"], record["thread_id"]) == ("answer", "edit", "edit-me")


async def test_a_rejection_abstains_and_bad_decisions_are_one_line(store_url):
    held = await aask(WHO, REVIEW)
    done = await aresolve_review(held["thread_id"], "reject", note="unrelated sentence")
    assert done["decision"] == "abstain" and done["answer"].startswith("I don't know")
    assert reviews.get(held["thread_id"])["note"] == "unrelated sentence"
    for args, message in ((("nope", "approve"), "no review 'nope'"),
                          ((held["thread_id"], "shrug"), "action must be one of approve, edit, reject"),
                          ((held["thread_id"], "edit"), "edit needs the reviewed answer")):  # fmt: skip
        with pytest.raises(ReviewError, match=message):
            await aresolve_review(*args)


async def test_a_new_question_on_a_thread_awaiting_review_is_refused_and_the_review_kept(store_url):
    await aask(WHO, REVIEW, thread_id="busy")
    with pytest.raises(ThreadBusyError, match="awaiting review"):
        await aask("How many days do I have to return an item?", thread_id="busy")
    assert [r["id"] for r in reviews.pending()] == ["busy"]
    # Held by aask, decided by the sync path: one queue, one thread.
    assert (await asyncio.to_thread(resolve_review, "busy", "approve"))["answer"] == DRAFT


async def test_a_review_claimed_by_another_decider_waits_or_is_refused(store_url, monkeypatch):
    ask(WHO, context=REVIEW, thread_id="claimed")  # held on the sync path, decided on the async one
    async with leases.aheld("claimed", purpose="review"):  # another reviewer's claim
        assert reviews.get("claimed")["status"] == "resolving"
        monkeypatch.setenv("SELFCRAG_TURN_WAIT", "0")
        with pytest.raises(ThreadBusyError, match="thread claimed is busy: another review holds it"):
            await aresolve_review("claimed", "approve")
    monkeypatch.delenv("SELFCRAG_TURN_WAIT")
    assert reviews.get("claimed")["status"] == "pending"
    assert (await aresolve_review("claimed", "reject"))["decision"] == "abstain"


async def test_twenty_concurrent_runs_lose_no_record_and_no_review(store_url):
    questions = [q["question"] for q in QUESTIONS[:20]]
    outputs = await asyncio.gather(*(aask(q, REVIEW_EVERY_ANSWER) for q in questions))
    held = [o for o in outputs if o["decision"] == "human_review"]
    assert {o["decision"] for o in outputs} <= {"human_review", "abstain"} and len(held) >= 16
    assert sorted(r["id"] for r in reviews.pending()) == sorted(h["thread_id"] for h in held)
    done = await asyncio.gather(*(aresolve_review(h["thread_id"], "approve") for h in held))
    assert all(d["decision"] == "answer" for d in done) and reviews.pending() == []
    records = runs.recent(0)
    assert sorted(r["question"] for r in records) == sorted(questions)
    reviewed = {r["thread_id"] for r in records if (r["decision"], r["reviewed"]) == ("answer", "approve")}
    assert reviewed == {h["thread_id"] for h in held}


@pytest.mark.system  # kills (kill -9) a running decider
def test_a_review_whose_async_decider_is_killed_is_pending_again_and_decidable(store_url, tmp_path):
    assert ask(WHO, context=REVIEW, thread_id="killed")["decision"] == "human_review"
    marker = tmp_path / "in-human_review"
    approving = subprocess.Popen([*STOPPED, "human_review", str(marker), "areview", "killed", "approve"],
                                 env=environment(), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    eventually(lambda: marker.exists() or approving.poll() is not None, "the async decider reaching human_review")
    assert marker.exists(), approving.communicate()[1][-2000:]
    claimed = reviews.get("killed")
    assert claimed["status"] == "resolving" and claimed["claimed_by"].split(":")[1] == str(approving.pid)
    assert kill(approving).returncode == -signal.SIGKILL
    eventually(lambda: reviews.get("killed")["status"] == "pending", "the killed decider's claim running out")
    rejected = asyncio.run(aresolve_review("killed", "reject", note="not about founders"))
    assert rejected["decision"] == "abstain" and reviews.get("killed")["status"] == "rejected"


@pytest.fixture(autouse=True)
def _review_env(monkeypatch):
    monkeypatch.delenv("SELFCRAG_HUMAN_REVIEW", raising=False)
