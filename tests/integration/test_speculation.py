"""Speculative generation through the real `ChatOpenAI` client against the local OpenAI-compatible server: the
happy path is two sequential round trips, a draft grading disagrees with is discarded for the normal path's
answer, a failing speculative call degrades to that path, and `speculate=False` restores three round trips.

Round trips are counted from the order in which the server saw calls start and end (a call that starts before
the current wave has ended joins it), never from how long anything took. Where two calls must overlap, each
waits on the server for the other to arrive, so the overlap is a fact of ordering, not of timing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer, Reply, Request
from support.replies import Plausible
from support.shelf import Shelf

from selfcrag import Context, build_graph, offline_components
from selfcrag.backend import model_components

QUESTION = "How many days do I have to return an item?"
GRADES, GENERATE = "Grade every passage", "You answer questions using only the evidence"
CHECK, ANSWER_GRADE = "statement by statement", "grade whether an answer"
ROUTE = "You route a user's message"  # the route comes first: one round trip before retrieval


def waves(requests: list[Request]) -> list[list[str]]:
    """The calls grouped into sequential round trips, each call named by the prompt it answers."""
    grouped: list[list[str]] = []
    wave_end = float("-inf")
    for request in sorted(requests, key=lambda r: r.started):
        name = next(n for n in (ROUTE, GRADES, GENERATE, CHECK, ANSWER_GRADE, "") if n in request.system) or "other"
        if request.started >= wave_end:
            grouped.append([])
        wave_end = max(wave_end, request.ended) if grouped[-1] else request.ended
        grouped[-1].append(name)
    return [sorted(wave) for wave in grouped]


def meeting(respond: Callable[[Request], Reply], *pairs: tuple[str, str]) -> Callable[[Request], Reply]:
    """The first call of each prompt in a pair waits on the server for the first call of the other before it is
    answered: if the graph made them one after the other, the first would wait out its 10 s, end before the
    second started, and the test would see two waves, not one."""
    partner = {a: b for pair in pairs for a, b in (pair, pair[::-1])}
    arrived = {role: threading.Event() for role in partner}

    def answer(request: Request) -> Reply:
        role = next((r for r in partner if r in request.system), None)
        if role and not arrived[role].is_set():
            arrived[role].set()
            arrived[partner[role]].wait(10)
        return respond(request)

    return answer


DRAFT_AND_GRADES, CHECKS = (GRADES, GENERATE), (CHECK, ANSWER_GRADE)


@contextmanager
def served(respond: Callable[[Request], Reply]) -> Iterator[tuple[OpenAIServer, Any]]:
    with OpenAIServer(respond) as server:
        llm = ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0, timeout=20)
        yield server, build_graph(model_components(llm, retriever=Shelf()))


def nodes(result: dict[str, Any]) -> list[str]:
    return [step["node"] for step in result["trace"]]


def step(result: dict[str, Any], node: str) -> dict[str, Any]:
    return next(s for s in result["trace"] if s["node"] == node)


def test_the_happy_path_is_the_route_then_two_sequential_round_trips_grading_beside_the_draft_then_both_checks():
    with served(meeting(Plausible().responder(), DRAFT_AND_GRADES, CHECKS)) as (server, graph):
        result = graph.invoke({"question": QUESTION})
    assert waves(server.requests) == [[ROUTE], sorted([GRADES, GENERATE]), sorted([CHECK, ANSWER_GRADE])]
    assert nodes(result) == ["prepare", "contextualize", "route_question", "retrieve", "grade_documents",
                             "speculate", "adopt_draft",
                             "check_hallucination", "grade_answer", "finalize"]  # fmt: skip
    assert step(result, "adopt_draft")["decision"] == "kept"
    assert result["decision"] == "answer" and "30 days" in result["answer"]
    assert result["llm_calls"] == len(server.requests) == 5 and result["tokens"] == server.tokens


def test_speculate_false_restores_three_sequential_round_trips_after_the_route():
    with served(meeting(Plausible().responder(), CHECKS)) as (server, graph):
        result = graph.invoke({"question": QUESTION}, context=Context(speculate=False))
    assert waves(server.requests) == [[ROUTE], [GRADES], [GENERATE], sorted([CHECK, ANSWER_GRADE])]
    assert nodes(result) == ["prepare", "contextualize", "route_question", "retrieve", "grade_documents", "refine",
                             "generate",
                             "check_hallucination", "grade_answer", "finalize"]  # fmt: skip
    assert result["decision"] == "answer" and "30 days" in result["answer"]


def test_a_draft_citing_a_passage_grading_rejects_is_discarded_and_the_answer_comes_from_the_normal_path():
    # Grading keeps only the electronics passage: the action is still correct, but the draft cites the returns
    # passage (its doc_1), which the kept evidence does not have.
    model = Plausible(relevant=lambda question, text: "Electronics" in text)
    with served(meeting(model.responder(), DRAFT_AND_GRADES, CHECKS)) as (server, graph):
        result = graph.invoke({"question": QUESTION})
    drafts = server.asking(GENERATE)
    assert len(drafts) == 2
    assert "30 days" in drafts[0].user and "30 days" not in drafts[1].user  # the second from the kept passage only
    assert waves(server.requests) == [[ROUTE], sorted([GRADES, GENERATE]), [GENERATE], sorted([CHECK, ANSWER_GRADE])]
    adopt = step(result, "adopt_draft")
    assert adopt["decision"] == "discarded" and "cites doc_1" in adopt["reason"]
    assert nodes(result)[6:9] == ["adopt_draft", "refine", "generate"]
    assert "15 days" in result["answer"] and "30 days" not in result["answer"]
    assert result["llm_calls"] == len(server.requests) == 6 and result["tokens"] == server.tokens  # the draft's too


def test_a_failing_speculative_call_degrades_to_the_normal_path():
    plausible = Plausible().responder()
    failed: list[Request] = []

    def respond(request: Request) -> Reply:
        if GENERATE in request.system and not failed:  # the draft written while grading: not transient, no retry
            failed.append(request)
            return Reply.fail(400, "scripted failure")
        return plausible(request)

    with served(meeting(respond, DRAFT_AND_GRADES, CHECKS)) as (server, graph):
        result = graph.invoke({"question": QUESTION})
    assert waves(server.requests) == [[ROUTE], sorted([GRADES, GENERATE]), [GENERATE], sorted([CHECK, ANSWER_GRADE])]
    assert [r.status for r in server.asking(GENERATE)] == [400, 200]
    assert "400" in step(result, "speculate")["error"]
    adopt = step(result, "adopt_draft")
    assert adopt["decision"] == "discarded" and adopt["reason"].startswith("the speculative draft failed")
    assert nodes(result)[7:9] == ["refine", "generate"]
    assert result["decision"] == "answer" and "30 days" in result["answer"]
    assert "400" not in result["answer"] + result.get("missing", "")


def test_the_offline_backend_never_speculates():
    result = build_graph(offline_components(retriever=Shelf())).invoke({"question": QUESTION})
    assert not {"speculate", "adopt_draft"} & set(nodes(result))
    assert nodes(result)[:7] == ["prepare", "contextualize", "route_question", "retrieve", "grade_documents",
                                 "refine", "generate"]
