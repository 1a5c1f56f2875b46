"""The graph's loops end within their bounds however badly the graders behave (in-process fakes)."""

from __future__ import annotations

from collections import Counter

import pytest

from selfcrag import Components, Context, WebSearchError, build_graph
from selfcrag.contract import (
    AnswerGrade,
    Draft,
    Grading,
    GroundednessCheck,
    Passage,
    Refinement,
    Rewrite,
    Strip,
)

PASSAGE = Passage(id="p#0", doc_id="p", chunk_index=0, title="P", source="p.md", text="Returns take 30 days.",
                  score=0.9, origin="kb")


class Fixed:
    """One fake for every component; each answer is fixed, each call costs `calls` model calls."""

    def __init__(self, label="correct", grounded=True, useful=True, calls=0, web=None):
        self.label, self.is_grounded, self.is_useful, self.calls, self.web_results = label, grounded, useful, calls, web
        self.seen: Counter[str] = Counter()
        self.avoid_seen: list[list[str]] = []

    # retriever
    def retrieve(self, query, settings):
        # A new chunk each round: a round that finds only chunks seen before ends the correction by itself
        # (test_accumulate.py), and these tests are about the counters' bounds.
        self.seen["retrieve"] += 1
        return [Passage(**{**PASSAGE, "id": f"p#{self.seen['retrieve']}"})]

    # relevance grader
    def grade(self, question, passages_or_answer, settings):
        if isinstance(passages_or_answer, str):  # answer grader
            self.seen["grade_answer"] += 1
            return AnswerGrade(score=0.9 if self.is_useful else 0.1, useful=self.is_useful,
                               missing="" if self.is_useful else "the number of days", llm_calls=self.calls)
        self.seen["grade_documents"] += 1
        grades = [{"id": p["id"], "label": self.label, "score": 0.5, "reason": "fixed"} for p in passages_or_answer]
        return Grading(grades=grades, llm_calls=self.calls)

    def refine(self, question, passages, settings):
        strips = [Strip(id=p["id"], doc_id=p["doc_id"], title=p["title"], source=p["source"], text=p["text"],
                        score=0.9) for p in passages]
        return Refinement(strips=strips)

    def generate(self, question, strips, settings, avoid=None, history=None):
        self.seen["generate"] += 1
        self.avoid_seen.append(list(avoid or []))
        cite = {"ref": "doc_1", "doc_id": "p", "title": "P", "source": "p.md", "quote": "Returns take 30 days."}
        return Draft(answer="Returns take 30 days from delivery. [doc_1]", citations=[cite], llm_calls=self.calls)

    def check(self, answer, strips, settings, question="", given=""):
        self.seen["check"] += 1
        return GroundednessCheck(score=1.0 if self.is_grounded else 0.2, grounded=self.is_grounded,
                                 unsupported=[] if self.is_grounded else ["Returns take 30 days from delivery."],
                                 llm_calls=self.calls)

    def rewrite(self, question, query, evidence, feedback, for_web, settings):
        self.seen["rewrite_web" if for_web else "rewrite"] += 1
        # A new term each time: a rewrite that adds none ends the correction by itself (test_routing.py).
        return Rewrite(query=f"{query} again{self.seen['rewrite']}", reason="fixed", llm_calls=self.calls)

    @property
    def available(self):
        return self.web_results is not None

    def search(self, query, settings):
        self.seen["web"] += 1
        if self.web_results == "fail":
            raise WebSearchError("web search failed: timeout")
        return self.web_results


def graph_with(fake: Fixed):
    parts = Components(relevance=fake, refiner=fake, generator=fake, groundedness=fake, answer_grader=fake,
                       rewriter=fake, web=fake, retriever=fake)
    # Caps high enough that the graph's own bounds, not the operator's caps, are what these tests exercise.
    return build_graph(parts, settings={"cap_retrieval_rounds": 50, "cap_generations": 50})


def nodes_of(result):
    return [step["node"] for step in result["trace"]]


def test_happy_path_answers_once():
    fake = Fixed()
    result = graph_with(fake).invoke({"question": "How long do returns take?"}, context=Context(min_confidence=0.5))
    # Plain's single-pass draft, checked, scores above the floor: no grading, no correction.
    assert nodes_of(result) == ["prepare", "contextualize", "route_question", "retrieve", "first_draft",
                                "check_hallucination", "grade_answer", "judge", "finalize"]
    assert result["decision"] == "answer"
    assert result["citations"][0]["doc_id"] == "p"


def test_irrelevant_retrieval_stops_after_max_rounds():
    fake = Fixed(label="incorrect", useful=False)  # plain's draft scores low: the correction grades everything away
    result = graph_with(fake).invoke({"question": "q"}, context=Context(max_retrieval_rounds=3))
    assert fake.seen["retrieve"] == 3
    assert fake.seen["generate"] == 1  # plain's draft only: no passage survived grading
    assert result["decision"] == "abstain"
    # plain's draft was the only candidate, and the floor withheld it: the abstention says so
    assert result["answer"].startswith("I can't answer this with enough confidence")
    assert nodes_of(result)[-1] == "finalize"
    assert "below the minimum" in result["trace"][-1]["reason"]


def test_ungrounded_answer_regenerates_with_feedback_then_stops():
    fake = Fixed(grounded=False)
    result = graph_with(fake).invoke({"question": "q"}, context=Context(max_generations=2, max_retrieval_rounds=1))
    assert fake.seen["generate"] == 3  # plain's draft, then a draft from the refined strips and its regeneration
    # the regeneration was told what was unsupported
    assert fake.avoid_seen == [[], [], ["Returns take 30 days from delivery."]]
    assert result["decision"] == "abstain"


def test_useless_answers_rewrite_and_retry_until_rounds_run_out():
    fake = Fixed(useful=False)
    result = graph_with(fake).invoke({"question": "q"}, context=Context(max_retrieval_rounds=3))
    assert fake.seen["retrieve"] == 3
    assert fake.seen["rewrite"] == 2
    queries = [s["reason"] for s in result["trace"] if s["node"] == "retrieve"]
    assert "q again1 again2" in queries[-1]


@pytest.mark.parametrize("budget", [0, 3, 7])
def test_llm_call_budget_stops_corrections(budget):
    fake = Fixed(grounded=False, useful=False, calls=1)
    result = graph_with(fake).invoke({"question": "q"}, context=Context(max_llm_calls=budget, max_retrieval_rounds=50,
                                                                         max_generations=50))
    # The budget is checked before each correction, so a run overshoots by at most one round's calls (5 here).
    assert result["llm_calls"] <= budget + 5
    assert fake.seen["retrieve"] <= budget + 1


def test_everything_failing_still_ends_well_inside_the_recursion_limit():
    fake = Fixed(label="ambiguous", grounded=False, useful=False, web="fail")
    result = graph_with(fake).invoke({"question": "q"}, context=Context(max_retrieval_rounds=3, max_generations=2))
    assert len(result["trace"]) < 50
    assert fake.seen["web"] == 1  # a failed web search is not retried
    assert any(s["node"] == "web_search" and s["decision"] == "unavailable" for s in result["trace"])
    assert result["decision"] in ("abstain", "answer_with_caveat")


def test_incorrect_with_web_search_replaces_evidence_with_web_results():
    web = [Passage(id="web:1#0", doc_id="web:1", chunk_index=0, title="Web", source="https://example.org/r",
                   text="Returns take 30 days.", score=0.8, origin="web")]
    fake = Fixed(label="incorrect", useful=False, web=web)  # plain's draft scores low: the correction runs
    calls = []
    fake_grade = fake.grade

    def grade(question, items, settings):  # kb passages are incorrect, web results correct
        if isinstance(items, list) and items and items[0]["origin"] == "web":
            calls.append("web graded")
            return Grading(grades=[{"id": p["id"], "label": "correct", "score": 0.9, "reason": "web"} for p in items])
        return fake_grade(question, items, settings)

    fake.grade = grade
    result = graph_with(fake).invoke({"question": "q"}, context=Context(min_confidence=0.5))
    assert nodes_of(result)[:12] == ["prepare", "contextualize", "route_question", "retrieve", "first_draft",
                                     "check_hallucination", "grade_answer", "judge", "grade_documents",
                                     "rewrite_query", "web_search", "generate"]
    assert fake.seen["rewrite_web"] == 1
    assert calls == ["web graded"]


def test_empty_question_is_a_clear_error():
    with pytest.raises(ValueError, match="question is empty"):
        graph_with(Fixed()).invoke({"question": "   "})


def test_last_user_message_is_the_question():
    result = graph_with(Fixed()).invoke(
        {"messages": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "a"},
                      {"role": "user", "content": "How long do returns take?"}]}
    )
    assert result["trace"][0]["question"] == "How long do returns take?"
