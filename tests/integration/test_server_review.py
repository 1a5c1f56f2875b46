"""Hostile input on the real `langgraph dev` server, driven with `langgraph_sdk`: a thread paused for human review
that receives an unusable reply stays paused, asks again with an `error`, and still approves; a question that
is not text, or too long, fails its run with one line saying so; a body above the server's cap stops at the door."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.schema import Command
from test_server import REVIEW_EVERY_ANSWER, assistant_id, client, server_url  # noqa: F401

pytestmark = pytest.mark.system  # a langgraph dev server

QUESTION = "How long do I have to send back a pair of headphones?"
BAD_REPLIES = [
    {"action": "edit", "answer": 5},
    "",
    [],
    {"action": "approve", "answer": {"x": 1}},
    "x" * 200_000,  # bigger bodies stop at the door (test_an_oversize_reply_or_question_stops_at_the_door)
    {"action": "edit"},
    {"action": "edit", "answer": " "},
    {"action": "delete"},
    5,
    True,
    "edit",
    {"action": "approve", "extra": 1},
]


def paused(client, assistant_id) -> tuple[str, dict]:  # noqa: ANN001, F811
    thread = client.threads.create()["thread_id"]
    result = client.runs.wait(thread, assistant_id, input={"question": QUESTION}, context=REVIEW_EVERY_ANSWER)
    assert result["decision"] == "human_review"
    draft = request_of(client, thread)  # the paused output says only that it awaits review; the draft is here
    return thread, {**result, "answer": draft["draft_answer"], "citations": draft["citations"]}


def request_of(client, thread: str) -> dict:  # noqa: ANN001, F811
    state = client.threads.get_state(thread)
    assert state["next"] == ["human_review"]
    (interrupt,) = state["interrupts"]
    return interrupt["value"]


def test_every_unusable_reply_keeps_the_thread_paused_and_it_still_approves(client, server_url, assistant_id):  # noqa: F811
    async def review(reply: object) -> tuple[dict, dict, dict, dict]:
        """One thread per reply, all at once: pause, send the bad reply, read the new request, approve."""
        aclient = get_client(url=server_url)
        thread = (await aclient.threads.create())["thread_id"]
        before = await aclient.runs.wait(thread, assistant_id, input={"question": QUESTION},
                                         context=REVIEW_EVERY_ANSWER)  # fmt: skip
        first = (await aclient.threads.get_state(thread))["interrupts"][0]["value"]
        run = await aclient.runs.wait(thread, assistant_id, command=Command(resume=reply))
        assert "__error__" not in run, (reply, run)
        state = await aclient.threads.get_state(thread)
        assert state["next"] == ["human_review"] and (await aclient.threads.get(thread))["status"] == "interrupted"
        (interrupt,) = state["interrupts"]
        done = await aclient.runs.wait(thread, assistant_id, command=Command(resume={"action": "approve"}))
        assert (await aclient.threads.get(thread))["status"] == "idle"
        return before, first, interrupt["value"], done

    async def review_all() -> list[tuple[dict, dict, dict, dict]]:
        return await asyncio.gather(*(review(reply) for reply in BAD_REPLIES))

    for reply, (before, first, request, done) in zip(BAD_REPLIES, asyncio.run(review_all()), strict=True):
        assert before["decision"] == "human_review"
        assert request["error"] and "\n" not in request["error"], reply
        assert {k: v for k, v in request.items() if k != "error"} == first  # the same case, plus what was wrong
        assert done["decision"] == "answer" and done["answer"] == first["draft_answer"], reply
        assert done["messages"][-1]["content"] == first["draft_answer"]


def test_a_bad_reply_then_an_edit_ends_with_the_reviewed_answer(client, assistant_id):  # noqa: F811
    thread, _ = paused(client, assistant_id)
    # Resuming with nothing is LangGraph's to handle (the node never sees it); the thread stays reviewable.
    client.runs.wait(thread, assistant_id, command=Command(resume=None), raise_error=False)
    assert request_of(client, thread)["question"] == QUESTION
    client.runs.wait(thread, assistant_id, command=Command(resume={"action": "edit", "answer": ""}))
    assert "edit needs the edited answer" in request_of(client, thread)["error"]
    done = client.runs.wait(thread, assistant_id, command=Command(resume={"action": "edit", "answer": "15 days."}))
    assert done["decision"] == "answer" and done["answer"] == "15 days."
    assert done["trace"][-1]["reason"] == "reviewer: edit (after 1 unusable reply)"


def test_an_oversize_reply_or_question_stops_at_the_door_and_the_thread_stays_reviewable(client, assistant_id):  # noqa: F811
    thread, before = paused(client, assistant_id)
    for command, given in ((Command(resume="x" * 2_000_000), None), (None, {"question": "x" * 10_000_000})):
        with pytest.raises(httpx.HTTPStatusError) as caught:
            client.runs.wait(thread, assistant_id, command=command, input=given)
        assert caught.value.response.status_code == 403
        assert "at most 1,000,000 (SELFCRAG_MAX_REQUEST_BYTES)" in caught.value.response.json()["detail"]
    assert request_of(client, thread)["draft_answer"] == before["answer"]  # nothing reached the thread
    done = client.runs.wait(thread, assistant_id, command=Command(resume="approve"))
    assert done["decision"] == "answer" and done["answer"] == before["answer"]


def test_twenty_one_bad_replies_in_a_row_still_pause_and_then_approve(client, assistant_id):  # noqa: F811
    thread, before = paused(client, assistant_id)
    for _ in range(21):
        client.runs.wait(thread, assistant_id, command=Command(resume={"action": "maybe"}))
    assert client.threads.get_state(thread)["values"]["review"]["bad_replies"] == 21
    assert "action must be one of" in request_of(client, thread)["error"]
    done = client.runs.wait(thread, assistant_id, command=Command(resume="approve"))
    assert done["decision"] == "answer" and done["answer"] == before["answer"]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"question": 5}, "`question` must be a string, got int"),
        ({"question": ["How long?"]}, "`question` must be a string, got list"),
        ({"question": {"text": "How long?"}}, "`question` must be a string, got dict"),
        ({"question": None}, "the question is empty"),
        ({"question": "x" * 500_000}, "the question has 500,000 characters; at most 4,000"),
        ({"question": "\x1b[0m\u200b"}, "the question has no visible text"),
    ],
    ids=["int", "list", "dict", "none", "500KB", "invisible"],
)
def test_a_question_that_is_not_usable_fails_the_run_with_one_line(client, assistant_id, given, says):  # noqa: F811
    thread = client.threads.create()["thread_id"]
    run = client.runs.wait(thread, assistant_id, input=given, raise_error=False)
    error = run["__error__"]
    assert error["error"] in ("QuestionError", "EmptyQuestionError"), error
    assert error["message"].startswith(says) and "\n" not in error["message"]
    # The thread is not wedged: the next run drafts its answer and decides (the calibrated confidence of this
    # paraphrased question sits below the general bar, so the decision itself is not the point here).
    answered = client.runs.wait(thread, assistant_id, input={"question": QUESTION})
    assert answered["decision"] in ("answer", "answer_with_caveat", "abstain")
    assert "15 days" in answered["trace"][-1]["draft"]


def test_escape_codes_in_a_question_sent_to_the_server_do_not_change_the_answer(client, assistant_id):  # noqa: F811
    plain = client.runs.wait(None, assistant_id, input={"question": QUESTION})
    coloured = client.runs.wait(None, assistant_id, input={"question": f"\x1b[31m{QUESTION}\x1b[0m\u200b"})
    assert coloured["answer"] == plain["answer"] and coloured["decision"] == plain["decision"]
    assert coloured["trace"][0]["question"] == QUESTION
