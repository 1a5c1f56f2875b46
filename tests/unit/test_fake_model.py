"""selfcrag.testing.FakeChatModel: the model backend end to end in-process, on the bundled sample knowledge base."""

from __future__ import annotations

from selfcrag import build_graph
from selfcrag.testing import FakeChatModel

RETURNS = "How many days do I have to return an item?"


def test_the_model_backend_answers_with_a_citation():
    model = FakeChatModel()
    result = build_graph(llm=model).invoke({"question": RETURNS})
    assert result["decision"] == "answer" and "30 days" in result["answer"]
    assert result["citations"][0]["doc_id"] == "returns_policy"
    # One call per role, each parsed: no step degraded from a fault.
    # No route call: the index knows the question's words and there is no web search, so only `retrieve` could come.
    # Plain's single-pass draft and its two checks: it scores above the floor, so nothing is graded or corrected.
    assert sorted(model.calls) == ["answer", "answer_grade", "groundedness"]
    assert result["llm_calls"] == 3 and not [s for s in result["trace"] if s.get("error")]


def test_a_greeting_is_routed_to_a_direct_reply_with_one_call():
    model = FakeChatModel()
    result = build_graph(llm=model).invoke({"question": "Hello!"})
    assert result["decision"] == "direct" and result["citations"] == [] and model.calls == ["route"]
    assert [s["node"] for s in result["trace"]] == ["prepare", "contextualize", "route_question", "finalize"]


def test_it_abstains_when_nothing_relevant_is_found():
    model = FakeChatModel(relevant=lambda question, text: False)
    result = build_graph(llm=model).invoke({"question": RETURNS}, context={"max_retrieval_rounds": 1})
    assert result["decision"] == "abstain" and result["citations"] == []
    # Nothing relevant: plain's draft finds nothing, grading keeps nothing; no generation after it.
    assert model.calls.count("answer") == 1 and [s for s in result["trace"] if s["node"] == "generate"] == []
    assert not [s for s in result["trace"] if s.get("error")]


def test_a_scripted_unsupported_statement_is_regenerated_then_never_shown():
    # In its own words: a sentence copied from the evidence it cites is grounded whatever the checker says.
    model = FakeChatModel(unsupported={"30 days"}, answer="You have 30 days from delivery to send it back [doc_1].")
    result = build_graph(llm=model).invoke({"question": RETURNS})
    assert result["decision"] == "abstain" and result["citations"] == []
    # Plain's draft, a draft from the refined strips, regenerated once (max_generations), then given up.
    assert model.calls.count("answer") == 3


def test_a_grader_fault_degrades_the_step_and_the_run_goes_on():
    model = FakeChatModel(fail={"relevance"}, declines=1)  # plain's draft finds nothing: the run grades
    result = build_graph(llm=model).invoke({"question": RETURNS})
    [grading] = [s for s in result["trace"] if s["node"] == "grade_documents"]
    assert "FakeModelError" in grading["error"]  # relevance fails open: the passages stay in play
    assert result["decision"] in ("answer", "answer_with_caveat") and "30 days" in result["answer"]


def test_grading_one_passage_per_call_and_a_fixed_answer():
    model = FakeChatModel(answer="Within 30 days of delivery [doc_1].", declines=1)
    result = build_graph(llm=model, settings={"grading": "parallel"}).invoke({"question": RETURNS})
    assert model.calls.count("relevance") > 1 and result["answer"].startswith("Within 30 days of delivery")


def test_the_documented_example_runs():
    import re
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "graph.md").read_text(encoding="utf-8")
    section = page.split("## Testing your app", 1)[1]
    [code] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    scope: dict = {}
    exec(compile(code, "docs/graph.md", "exec"), scope)  # noqa: S102 - our own docs
    tests = [name for name in scope if name.startswith("test_")]
    assert len(tests) == 3
    for name in tests:
        scope[name]()


def test_with_one_call_left_for_two_checks_the_groundedness_check_gets_it_whichever_starts_first():
    import threading

    from selfcrag.backend import model_components

    model = FakeChatModel()
    components = model_components(model)
    checker, answered = components.groundedness, threading.Event()

    class LateChecker:  # asks only once the answer grader has had its chance at the last call
        def check(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            answered.wait(5)
            return checker.check(*args, **kwargs)

    grader = components.answer_grader

    class FirstGrader:
        def grade(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            try:
                return grader.grade(*args, **kwargs)
            finally:
                answered.set()

    components.groundedness, components.answer_grader = LateChecker(), FirstGrader()  # type: ignore[assignment]
    result = build_graph(components).invoke({"question": RETURNS}, context={"max_llm_calls": 2})
    assert model.calls == ["answer", "groundedness"]  # plain's draft took one; the check first in turn the other
    [grading] = [s for s in result["trace"] if s["node"] == "grade_answer"]
    assert "budget" in grading.get("error", "")
