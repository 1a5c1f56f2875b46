"""Where a held draft waits, run in process with the checkpointer and store a LangGraph server gives the graph, and
the caller a server with auth puts in the run's config (selfcrag/review_case.py; the real server:
test_server_auth.py). An asker's held draft goes to the store and nowhere in the thread's state; a resume decides
only from a reviewer, whom the record names; an operator's or an unauthenticated run keeps the case in state."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from selfcrag import build_graph, offline_components
from selfcrag.auth import unfinished
from selfcrag.context import Context
from selfcrag.nodes.human_review import check_reply
from selfcrag.nodes.prepare import make as make_prepare
from selfcrag.review_case import REVIEWS

QUESTION = "How long do I have to send back a pair of headphones?"
HOLD = {"human_review": True, "min_confidence": 1.0, "caveat_band": 0.0}


def config(thread: str, who: str = "", *permissions: str) -> dict[str, Any]:
    caller = {"langgraph_auth_user_id": who, "langgraph_auth_permissions": list(permissions)} if who else {}
    return {"configurable": {"thread_id": thread, **caller}}


def test_an_askers_draft_waits_in_the_store_and_only_a_reviewer_decides() -> None:
    store = InMemoryStore()
    graph = build_graph(offline_components(), checkpointer=InMemorySaver(), store=store)
    out = graph.invoke({"question": QUESTION}, config("t1", "alice", "asker"), context=HOLD)
    (interrupt,) = out["__interrupt__"]
    case = store.get(REVIEWS, "t1").value
    draft = case["draft_answer"]
    assert "15 days" in draft and case["draft_id"] == interrupt.value["draft_id"]
    assert interrupt.value["review"] == {"store": list(REVIEWS), "key": "t1"}
    values = graph.get_state(config("t1")).values
    sentence = draft.split(" [doc_")[0]  # the offline draft is a sentence of its evidence, marked with its source
    assert sentence not in json.dumps(values, default=str)  # no key of the thread's state quotes it
    assert values["draft"] == {"sealed": True, "thread_id": "t1", "draft_id": case["draft_id"]}

    # An asker's resume (were the server's door open) decides nothing: the thread asks again, with why.
    again = graph.invoke(Command(resume={"action": "approve"}), config("t1", "alice", "asker"))
    assert "only a reviewer decides" in again["__interrupt__"][0].value["error"]
    assert store.get(REVIEWS, "t1") is not None

    done = graph.invoke(Command(resume={"action": "approve"}), config("t1", "carol", "asker", "reviewer"))
    assert done["decision"] == "answer" and done["answer"] == draft and done["citations"] == case["citations"]
    assert done["trace"][-1]["reviewer"] == "carol"
    assert graph.get_state(config("t1")).values["review"] == {"action": "approve", "reviewer": "carol"}
    assert store.get(REVIEWS, "t1") is None


def test_a_reject_of_a_sealed_case_says_what_was_missing_from_the_case() -> None:
    store = InMemoryStore()
    graph = build_graph(offline_components(), checkpointer=InMemorySaver(), store=store)
    graph.invoke({"question": QUESTION}, config("t2", "alice", "asker"), context=HOLD)
    done = graph.invoke(Command(resume={"action": "reject"}), config("t2", "carol", "asker", "reviewer"))
    assert done["decision"] == "abstain" and done["citations"] == []


def test_an_operators_or_an_unauthenticated_run_keeps_the_case_in_state() -> None:
    store = InMemoryStore()
    graph = build_graph(offline_components(), checkpointer=InMemorySaver(), store=store)
    for thread, who in (("t3", ("olga", "asker", "reviewer", "operator")), ("t4", ())):
        out = graph.invoke({"question": QUESTION}, config(thread, *who), context=HOLD)
        request = out["__interrupt__"][0].value
        assert "15 days" in request["draft_answer"] and request["citations"]
        assert store.get(REVIEWS, thread) is None
        done = graph.invoke(Command(resume={"action": "approve", "draft_id": request["draft_id"]}),
                            config(thread, *who))  # fmt: skip
        assert done["answer"] == request["draft_answer"]


def test_a_reply_may_name_the_draft_it_read_as_short_text() -> None:
    assert check_reply({"action": "approve", "draft_id": "05f7c850cc43"}) == (
        {"action": "approve", "draft_id": "05f7c850cc43"}, "")
    for bad in (5, "", "x" * 65, ["a"]):
        review, error = check_reply({"action": "approve", "draft_id": bad})
        assert review == {} and error.startswith("`draft_id` must be the held draft's id")


class BrokenChecker:
    """A groundedness check that fails: the run stops right after `generate`, as a fault or a cancel would."""

    def check(self, answer: str, strips: list[Any], settings: Any, question: str = "", given: str = "") -> Any:
        raise RuntimeError("the checker failed")


def test_a_turn_that_stops_halfway_is_known_by_its_empty_decision_until_a_run_finishes_it() -> None:
    components = replace(offline_components(), groundedness=BrokenChecker())
    graph = build_graph(components, checkpointer=InMemorySaver(), store=InMemoryStore())
    finished = build_graph(offline_components(), checkpointer=graph.checkpointer, store=graph.store)
    asker = config("t5", "alice", "asker")
    finished.invoke({"question": QUESTION}, asker, context=HOLD)  # a first turn that finished (held, sealed)
    assert not unfinished(graph.get_state(config("t5")).values)
    with pytest.raises(RuntimeError, match="the checker failed"):
        graph.invoke({"question": QUESTION}, asker, context=HOLD)
    values = graph.get_state(config("t5")).values
    # The thread's values are the unchecked draft's (what threads.get would serve): the door knows them by this.
    assert "15 days" in values["answer"] and values["decision"] == "" and unfinished(values)
    done = finished.invoke(None, asker, context=HOLD)  # input null: the turn finishes, sealed
    assert done["decision"] == "human_review" and not unfinished(graph.get_state(config("t5")).values)
    assert "15 days" not in json.dumps(graph.get_state(config("t5")).values, default=str)


def test_a_new_turn_starts_without_the_last_turns_candidates_or_decision() -> None:
    prepare = make_prepare(offline_components())
    state = {"question": QUESTION, "decision": "answer", "candidates": [{"answer": "Unchecked.", "showable": True}]}
    update = prepare(state, Runtime(context=Context()))  # type: ignore[arg-type]
    assert update["candidates"] == [] and update["decision"] == ""
