"""Every branch of every routing function."""

from __future__ import annotations

import json

import pytest
from langgraph.graph import END

from selfcrag import routing
from selfcrag.context import Context

S = Context(max_retrieval_rounds=3, max_generations=2, max_llm_calls=10)
STRIP = {"id": "a#0", "doc_id": "a", "title": "A", "source": "a.md", "text": "t", "score": 0.9}


def state(**kw):
    base = {"question": "q", "retrieval_rounds": 1, "generations": 1, "llm_calls": 0, "web_available": False}
    return base | kw


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"crag_action": "correct"}, "refine"),
        ({"crag_action": "incorrect", "evidence": [STRIP]}, "refine"),  # earlier rounds' evidence still counts
        ({"crag_action": "ambiguous"}, "refine"),
        ({"crag_action": "incorrect", "web_available": True}, "rewrite_query"),  # rewrite for web
        ({"crag_action": "incorrect"}, "rewrite_query"),  # no web: new retrieval round
        ({"crag_action": "incorrect", "retrieval_rounds": 3}, "finalize"),  # out of rounds
        ({"crag_action": "incorrect", "llm_calls": 10}, "finalize"),  # out of budget
        ({"crag_action": "incorrect", "retrieval_rounds": 3, "web_available": True}, "rewrite_query"),
        ({"crag_action": "incorrect", "retrieval_rounds": 3, "web_available": True, "web_searched": True}, "finalize"),
    ],
)
def test_after_grading(kw, expected):
    assert routing.after_grading(state(**kw), S) == expected


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"crag_action": "correct", "knowledge": [STRIP]}, "generate"),
        ({"crag_action": "ambiguous", "knowledge": [STRIP]}, "generate"),  # no web: use what we have
        ({"crag_action": "ambiguous", "knowledge": [STRIP], "web_available": True}, "web_search"),
        ({"crag_action": "correct", "knowledge": [STRIP], "web_available": True}, "generate"),
        ({"crag_action": "correct", "knowledge": [], "web_available": True}, "web_search"),
        ({"crag_action": "correct", "knowledge": []}, "rewrite_query"),
        ({"crag_action": "correct", "knowledge": [], "retrieval_rounds": 3}, "finalize"),
    ],
)
def test_after_refine(kw, expected):
    assert routing.after_refine(state(**kw), S) == expected


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"crag_action": "incorrect", "web_available": True}, "web_search"),
        ({"crag_action": "incorrect", "web_available": True, "web_searched": True}, "retrieve"),
        ({"crag_action": "incorrect"}, "retrieve"),
        ({"crag_action": "correct", "web_available": True}, "retrieve"),  # a failed answer grade: new round
        ({"query": "ship antarctica", "queries": ["Ship  Antarctica"]}, "finalize"),  # nothing new to retrieve
        # Fewer of the same terms: worth a try while the run has evidence to refine the search from ...
        ({"query": "ship antarctica", "queries": ["Do you ship to Antarctica by sea?"], "evidence": [STRIP]},
         "retrieve"),
        # ... but with every passage so far rejected it finds the same ones again: no retry.
        ({"query": "ship antarctica", "queries": ["Do you ship to Antarctica by sea?"]}, "finalize"),
        # The very terms of a query tried (stop words, order and case aside): the same passages, evidence or not.
        ({"query": "ship antarctica", "queries": ["Do you ship to Antarctica?"], "evidence": [STRIP]}, "finalize"),
        ({"query": "ship antarctica penguins", "queries": ["Do you ship to Antarctica?"]}, "retrieve"),  # a new term
        # Nothing new to retrieve, and evidence too weak to have been drafted from: draft from it now ...
        ({"query": "ship antarctica", "queries": ["ship antarctica"], "knowledge": [STRIP], "generations": 0},
         "generate"),
        # ... but a run that drafted already keeps its draft or abstention.
        ({"query": "ship antarctica", "queries": ["ship antarctica"], "knowledge": [STRIP]}, "finalize"),
    ],
)
def test_after_rewrite(kw, expected):
    assert routing.after_rewrite(state(**kw), S) == expected


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"knowledge": [STRIP]}, "generate"),
        ({"knowledge": []}, "rewrite_query"),
        ({"knowledge": [], "retrieval_rounds": 3}, "finalize"),
        ({"knowledge": [], "retrieval_rounds": 0}, "retrieve"),  # routed to the web first, found nothing: the kb
        ({"knowledge": [STRIP], "retrieval_rounds": 0}, "generate"),
    ],
)
def test_after_web_search(kw, expected):
    assert routing.after_web_search(state(**kw), S) == expected


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"answer": "x [doc_1]"}, ["check_hallucination", "grade_answer"]),  # both checks, concurrently
        ({"answer": ""}, "rewrite_query"),
        ({"answer": "", "retrieval_rounds": 3}, "finalize"),
        ({"answer": "", "llm_calls": 10}, "finalize"),
    ],
)
def test_after_generate(kw, expected):
    assert routing.after_generate(state(**kw), S) == expected


def candidate(confidence, plain=False, showable=True):
    return {"answer": "a [doc_1]", "confidence": confidence, "plain": plain, "showable": showable}


FLOOR = S.thresholds().overall


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        # The best candidate at the floor ends the run, whatever the latest draft's verdicts.
        ({"candidates": [candidate(FLOOR, plain=True)], "grounded": False}, "finalize"),
        ({"candidates": [candidate(FLOOR + 0.1), candidate(0.1)], "grounded": False}, "finalize"),
        # Below it, plain's draft is followed by the CRAG correction, starting with grading ...
        ({"candidates": [candidate(FLOOR - 0.2, plain=True)], "grounded": True}, "grade_documents"),
        ({"candidates": [candidate(FLOOR - 0.2, plain=True)], "grounded": False}, "grade_documents"),
        # ... a correction's ungrounded draft is regenerated while generations and budget remain ...
        ({"candidates": [candidate(0.2, plain=True), candidate(0.3)], "grades": [{}], "grounded": False},
         "generate"),
        ({"candidates": [candidate(0.2, plain=True), candidate(0.3)], "grades": [{}], "grounded": False,
          "generations": 2}, "rewrite_query"),  # out of generations
        # ... else the query is rewritten while rounds and budget remain
        ({"candidates": [candidate(0.3)], "grades": [{}], "grounded": True}, "rewrite_query"),
        ({"candidates": [candidate(0.3)], "grades": [{}], "grounded": True, "retrieval_rounds": 3}, "finalize"),
        ({"candidates": [candidate(0.3)], "grades": [{}], "grounded": False, "llm_calls": 10}, "finalize"),
        # A candidate that may not be shown (an exact finding) never ends the run by its score.
        ({"candidates": [candidate(0.99, showable=False)], "grades": [{}], "grounded": True}, "rewrite_query"),
    ],
)
def test_after_judge(kw, expected):
    assert routing.after_judge(state(**kw), S) == expected


def test_no_correction_where_the_calibration_says_corrections_did_not_pay(tmp_path):
    """A model's own fit may say its corrections lost more than they found on tuning runs: the run ends after
    plain's draft is judged, below the floor or not; the same file with `pay` true corrects as before."""
    body = {"model": {"features": ["answer_relevance"], "mean": [0.5], "scale": [0.2], "weights": [1.0],
                      "bias": 0.0}, "ungrounded_drafts": "scored"}
    below = state(candidates=[candidate(FLOOR - 0.2, plain=True)], grounded=False)
    for pay, expected in ((False, "finalize"), (True, "grade_documents")):
        path = tmp_path / f"pay_{pay}.json"
        path.write_text(json.dumps({**body, "corrections": {"pay": pay}}), encoding="utf-8")
        settings = Context(max_retrieval_rounds=3, max_generations=2, max_llm_calls=10, calibration=str(path))
        assert routing.after_judge(below, settings) == expected


@pytest.mark.parametrize(
    ("kw", "expected"),
    [({"answer": "a [doc_1]"}, routing.CHECKS), ({"answer": ""}, "grade_documents")],
)
def test_after_first_draft(kw, expected):
    assert routing.after_first_draft(state(**kw), S) == expected


def test_after_finalize():
    assert routing.after_finalize(state(decision="human_review"), S) == "human_review"
    for decision in ("answer", "answer_with_caveat", "abstain"):
        assert routing.after_finalize(state(decision=decision), S) == END


PASSAGE = {"id": "a#1", "doc_id": "a", "chunk_index": 1, "title": "A", "source": "a.md", "text": "Ships sail.",
           "score": 0.5, "origin": "kb"}


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"documents": [PASSAGE]}, "first_draft"),  # the first round drafts plain's answer first
        ({"documents": [PASSAGE], "candidates": [candidate(0.1)]}, "grade_documents"),
        ({"documents": []}, "grade_documents"),  # round 1 with nothing: grading says incorrect, a rewrite follows
        ({"documents": [PASSAGE], "retrieval_rounds": 2}, "grade_documents"),  # a new chunk: worth grading
        ({"documents": [], "retrieval_rounds": 2}, "finalize"),  # only chunks seen before: nothing to add
        # ... but evidence held back as too weak while corrections remained is generated from now
        ({"documents": [], "retrieval_rounds": 2, "knowledge": [STRIP], "generations": 0}, "generate"),
        ({"documents": [], "retrieval_rounds": 2, "knowledge": [STRIP], "answer": "a [doc_1]"}, "finalize"),
        ({"documents": [PASSAGE], "question": "؟؟ مرحبا بكم في"}, "finalize"),  # a script nothing reads
    ],
)
def test_after_retrieve(kw, expected):
    assert routing.after_retrieve(state(**kw), S) == expected


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"route": "direct"}, "finalize"),  # conversation: the reply route_question wrote, no retrieval
        ({"route": "retrieve"}, "retrieve"),
        ({"route": "web_search", "web_available": True}, "web_search"),
        ({"route": "web_search", "web_available": False}, "retrieve"),  # no web search: the knowledge base
        ({"route": "web_search", "web_available": True, "web_searched": True}, "retrieve"),
        ({}, "retrieve"),  # no route written (a forged or old thread): retrieve, never lose the question
        ({"route": "anything else"}, "retrieve"),
    ],
)
def test_after_route(kw, expected):
    assert routing.after_route(state(**kw), S) == expected
