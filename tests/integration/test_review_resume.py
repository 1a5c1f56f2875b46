"""Human review cannot wedge: every unusable reply leaves the thread paused, asking again with an `error`, and a
valid reply afterwards still decides. The offline graph with a real checkpointer (InMemorySaver)."""

from __future__ import annotations

import contextlib

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from selfcrag import Context, build_graph

CLEAR = "How many days do I have to return an item?"
SETTINGS = Context(human_review=True, min_confidence=0.999, caveat_band=0.0)  # every answer goes to review
BAD_REPLIES = [
    {"action": "edit", "answer": 5},
    "",
    [],
    {"action": "approve", "answer": {"x": 1}},
    "x" * 1_000_000,
    {"action": "edit"},
    {"action": "edit", "answer": "   "},
    {"action": "edit", "answer": "y" * 20_000},
    {"action": "delete"},
    {"answer": "30 days"},
    {"action": None},
    5,
    True,
    ["approve"],
    "edit",
    {"action": "reject", "note": 7},
    {"action": "approve", "extra": 1},
    {"action": ["approve"]},
]


@pytest.fixture(scope="module")
def graph():
    return build_graph(checkpointer=InMemorySaver())


def paused_thread(graph, name: str) -> tuple[dict, dict]:  # noqa: ANN001
    thread = {"configurable": {"thread_id": name}}
    paused = graph.invoke({"question": CLEAR}, thread, context=SETTINGS)
    assert paused["decision"] == "human_review"
    # The paused output only says the answer awaits review; the draft waits in the interrupt for the reviewer.
    assert paused["answer"].startswith("This answer awaits review") and paused["citations"] == []
    draft = request_of(paused)
    return thread, {**paused, "answer": draft["draft_answer"], "citations": draft["citations"]}


def request_of(result: dict) -> dict:
    (interrupt,) = result["__interrupt__"]
    return interrupt.value


@pytest.mark.parametrize("reply", BAD_REPLIES, ids=lambda r: repr(r)[:40])
def test_an_unusable_reply_asks_again_with_an_error_and_the_thread_still_approves(graph, reply):
    thread, paused = paused_thread(graph, f"bad-{id(reply)}")
    first = request_of(paused)
    assert "error" not in first

    again = graph.invoke(Command(resume=reply), thread, context=SETTINGS)
    request = request_of(again)
    assert request["error"] and "\n" not in request["error"] and len(request["error"]) < 300
    assert {k: v for k, v in request.items() if k != "error"} == first  # the same case, plus what was wrong
    assert graph.get_state(thread).next == ("human_review",)

    done = graph.invoke(Command(resume={"action": "approve"}), thread, context=SETTINGS)
    assert done["decision"] == "answer" and done["answer"] == paused["answer"]
    assert done["citations"] == paused["citations"] != []
    assert done["messages"][-1].content == paused["answer"]
    assert done["trace"][-1] == {"node": "human_review", "decision": "answer",
                                 "reason": "reviewer: approve (after 1 unusable reply)"}
    assert graph.get_state(thread).next == ()


def test_a_bad_reply_then_an_edit_keeps_the_citations_the_edit_still_marks(graph):
    thread, paused = paused_thread(graph, "bad-then-edit")
    graph.invoke(Command(resume={"action": "edit", "answer": 5}), thread, context=SETTINGS)
    ref = paused["citations"][0]["ref"]
    edited = f"Thirty days from delivery [{ref}]."
    done = graph.invoke(Command(resume={"action": "edit", "answer": f"\x1b[1m{edited}\x1b[0m"}), thread,
                        context=SETTINGS)  # fmt: skip
    assert done["decision"] == "answer" and done["answer"] == edited  # cleaned like a question
    assert [c["ref"] for c in done["citations"]] == [ref]


def test_a_bad_reply_then_a_reject_abstains_with_what_was_missing(graph):
    thread, _ = paused_thread(graph, "bad-then-reject")
    graph.invoke(Command(resume=[]), thread, context=SETTINGS)
    done = graph.invoke(Command(resume={"action": "reject", "note": "policy changed"}), thread, context=SETTINGS)
    assert done["decision"] == "abstain" and done["answer"].startswith("I don't know")
    assert done["missing"] and done["missing"] in done["answer"]  # a rejected hand-off says why too
    assert done["citations"] == []
    assert graph.get_state(thread).values["review"] == {"action": "reject", "note": "policy changed"}


def test_twenty_five_bad_replies_in_a_row_still_pause_and_state_does_not_grow(graph):
    thread, paused = paused_thread(graph, "many-bad")
    sizes = []
    for n in range(1, 26):
        result = graph.invoke(Command(resume="x" * 100_000 if n % 2 else {"action": "edit"}), thread,
                              context=SETTINGS)  # fmt: skip
        assert "error" in request_of(result)
        values = graph.get_state(thread).values
        assert values["review"]["bad_replies"] == n
        sizes.append((len(values["trace"]), len(repr(values["review"]))))
    assert graph.get_state(thread).next == ("human_review",)
    # Neither the trace nor the review record grows with the bad replies (the 100 kB replies are not kept).
    assert len({trace for trace, _ in sizes}) == 1 and max(size for _, size in sizes) < 400
    done = graph.invoke(Command(resume="approve"), thread, context=SETTINGS)
    assert done["decision"] == "answer" and done["answer"] == paused["answer"]
    assert done["trace"][-1]["reason"] == "reviewer: approve (after 25 unusable replies)"


@pytest.mark.parametrize("reply", [None, {}])
def test_resuming_with_nothing_leaves_the_thread_resumable(graph, reply):
    # LangGraph handles these itself, before the node sees them: `{}` is an empty map of interrupt ids (nothing
    # resumed, the same request again); None (1.2.x) fails inside LangGraph. The thread must stay reviewable.
    thread, paused = paused_thread(graph, f"resume-{reply!r}")
    with contextlib.suppress(Exception):  # LangGraph's own error, not the node's
        graph.invoke(Command(resume=reply), thread, context=SETTINGS)
    assert graph.get_state(thread).next == ("human_review",)
    done = graph.invoke(Command(resume={"action": "approve"}), thread, context=SETTINGS)
    assert done["decision"] == "answer" and done["answer"] == paused["answer"]


def test_a_new_run_on_the_thread_starts_without_the_last_review_error(graph):
    thread, _ = paused_thread(graph, "fresh-run")
    graph.invoke(Command(resume=5), thread, context=SETTINGS)
    graph.invoke(Command(resume="approve"), thread, context=SETTINGS)
    again = graph.invoke({"question": CLEAR}, thread, context=SETTINGS)
    assert "error" not in request_of(again)
