"""Decisions on the offline graph: the triad and confidence on every run, bands that follow the domain preset,
human review that pauses and resumes, and the multi-turn consistency check."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from selfcrag import Context, ask, build_graph

CLEAR = "How many days do I have to return an item?"  # strong evidence, copied answer: confidence ~0.95
WEAKER = "How long do I have to send back a pair of headphones?"  # paraphrase: answers, below the general bar


def test_every_run_carries_the_triad_confidence_explanation_and_quality():
    result = ask(CLEAR)
    assert result["decision"] == "answer"
    assert set(result["scores"]) == {"context_relevance", "groundedness", "answer_relevance"}
    explained = result["confidence_explanation"]
    assert set(explained["signals"]) == {"retrieval", "coverage", "faithfulness", "coherence"}
    assert explained["weights"] == {"retrieval": 0.30, "coverage": 0.25, "faithfulness": 0.35, "coherence": 0.10}
    assert explained["value"] == result["confidence"] and "pulled down most by" in explained["summary"]
    assert result["quality"] == {"thresholds": {"context_relevance": 0.70, "groundedness": 0.75,
                                                "answer_relevance": 0.70, "confidence": 0.72},
                                 "passed": True, "below": []}


def test_the_middle_band_answers_with_a_caveat_that_names_the_weak_score():
    result = ask(WEAKER)
    assert result["decision"] == "answer_with_caveat"
    assert result["quality"]["below"] and not result["quality"]["passed"]
    assert "Caveat:" in result["answer"] and "context relevance" in result["answer"]
    assert result["citations"]


def test_presets_and_risk_move_the_same_answer_across_bands():
    general = ask(WEAKER)
    medical = ask(WEAKER, context=Context(domain="medical", risk="critical"))
    lenient = ask(WEAKER, context=Context(risk="low", min_context_relevance=0.5))
    assert general["decision"] == "answer_with_caveat"
    assert medical["decision"] == "abstain"  # the medical bar sits far above this answer
    assert medical["quality"]["thresholds"]["confidence"] == 0.93
    assert lenient["decision"] == "answer" and lenient["quality"]["thresholds"]["context_relevance"] == 0.5
    # one override alone: only the confidence minimum changes, and that alone withholds the answer
    strict = ask(CLEAR, context=Context(min_confidence=0.999, caveat_band=0.0))
    assert strict["decision"] == "abstain" and strict["quality"]["below"] == ["confidence"]


def test_weights_change_the_confidence():
    default = ask(WEAKER)["confidence"]
    faithful_only = ask(WEAKER, context=Context(weight_retrieval=0, weight_coverage=0, weight_coherence=0))
    assert faithful_only["confidence"] == 1.0 != default


@pytest.mark.parametrize("action", ["approve", "edit", "reject"])
def test_human_review_pauses_with_the_case_and_resumes(action):
    graph = build_graph(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": f"review-{action}"}}
    settings = Context(human_review=True, min_confidence=0.999, caveat_band=0.0)
    paused = graph.invoke({"question": CLEAR}, thread, context=settings)
    request = paused["__interrupt__"][0].value
    assert request["question"] == CLEAR and "30" in request["draft_answer"]
    assert request["evidence"] and request["scores"]["groundedness"] == 1.0
    reply = {"action": action} | ({"answer": "Thirty days from delivery."} if action == "edit" else {})
    done = graph.invoke(Command(resume=reply), thread, context=settings)
    expected = {"approve": "answer", "edit": "answer", "reject": "abstain"}[action]
    assert done["decision"] == expected
    if action == "edit":  # rewritten without citation markers: the draft's sources are not claimed for it
        assert done["answer"] == "Thirty days from delivery." and done["citations"] == []
    if action == "approve":
        assert done["citations"] == request["citations"] != [] and paused["citations"] == []
    if action == "reject":
        assert done["answer"].startswith("I don't know") and done["citations"] == []
    assert done["trace"][-1]["node"] == "human_review"


def test_an_edited_answer_keeps_the_sources_it_still_cites():
    graph = build_graph(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "review-edit-cited"}}
    settings = Context(human_review=True, min_confidence=0.999, caveat_band=0.0)
    paused = graph.invoke({"question": CLEAR}, thread, context=settings)
    [first, *_] = paused["__interrupt__"][0].value["citations"]  # the draft's sources wait with it
    edited = f"Within thirty days of delivery [{first['ref']}]."
    done = graph.invoke(Command(resume={"action": "edit", "answer": edited}), thread, context=settings)
    assert done["answer"] == edited and [c["ref"] for c in done["citations"]] == [first["ref"]]


def test_an_answer_that_contradicts_an_earlier_one_in_the_thread_is_named_and_less_confident():
    alone = ask(CLEAR)
    history = [
        HumanMessage("Can I return things?"),
        AIMessage("Items can be returned within 15 days.", additional_kwargs={"decision": "answer"}),
        HumanMessage(CLEAR),
    ]
    result = build_graph().invoke({"messages": history})
    [conflict] = result["contradictions"]
    assert conflict["earlier"] == "Items can be returned within 15 days."
    assert conflict["why"] == "different quantities: \"15 days\" earlier, \"30 days\" now"
    assert result["confidence"] < alone["confidence"]
    assert result["decision"] != "answer"  # never a plain answer that contradicts the thread
    if result["decision"] == "answer_with_caveat":
        assert "contradicts an earlier answer" in result["answer"]


def test_an_agreeing_history_changes_nothing():
    history = [
        AIMessage("Most items can be returned within 30 days.", additional_kwargs={"decision": "answer"}),
        HumanMessage(CLEAR),
    ]
    result = build_graph().invoke({"messages": history})
    assert result["contradictions"] == [] and result["decision"] == "answer"
