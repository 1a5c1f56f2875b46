"""Evidence accumulates over the rounds of a run: the merge itself, and the graph around it (in-process fakes)."""

from __future__ import annotations

from collections import Counter

from langgraph.checkpoint.memory import InMemorySaver

from selfcrag import Components, Context, build_graph
from selfcrag.contract import AnswerGrade, Draft, Grading, GroundednessCheck, Passage, Refinement, Rewrite
from selfcrag.evaluation.signals import graph_signals
from selfcrag.offline.refine import accumulate


def strip(chunk: str, score: float, text: str = "", doc: str = "") -> dict:
    return {"id": chunk, "doc_id": doc or chunk.split("#")[0], "title": chunk, "source": f"{chunk}.md",
            "text": text or f"Text of {chunk}.", "score": score}


def test_a_chunk_found_again_keeps_its_best_score_once():
    evidence, knowledge = accumulate([strip("a#0", 0.6)], [strip("a#0", 0.8), strip("b#0", 0.5)], Context())
    assert [(s["id"], s["score"]) for s in evidence] == [("a#0", 0.8), ("b#0", 0.5)]
    assert [s["id"] for s in knowledge] == ["a#0", "b#0"]
    evidence, _ = accumulate(evidence, [strip("a#0", 0.3)], Context())
    assert [(s["id"], s["score"]) for s in evidence] == [("a#0", 0.8), ("b#0", 0.5)]  # a worse re-score changes nothing


def test_knowledge_keeps_the_rounds_best_strip_within_max_strips():
    first = [strip(f"a#{i}", 0.9 - i / 100) for i in range(3)]
    evidence, knowledge = accumulate(first, [strip("b#0", 0.4)], Context(max_strips=3))
    assert len(evidence) == 4
    # The second hop scores below every first-hop strip, yet it is what the round added: it stays.
    assert [s["id"] for s in knowledge] == ["a#0", "a#1", "b#0"]


def test_knowledge_fits_the_token_budget():
    long = " ".join(["word"] * 50) + "."
    evidence, knowledge = accumulate([strip("a#0", 0.9, long)], [strip("b#0", 0.5, long), strip("c#0", 0.4)],
                                     Context(strip_token_budget=60))
    assert len(evidence) == 3
    assert [s["id"] for s in knowledge] == ["b#0", "c#0"]  # the round's best first, then what still fits


def test_nothing_new_keeps_knowledge_as_ranked():
    evidence, knowledge = accumulate([strip("a#0", 0.9), strip("b#0", 0.7)], [], Context(max_strips=1))
    assert len(evidence) == 2 and [s["id"] for s in knowledge] == ["a#0"]


def passage(chunk: str) -> Passage:
    return Passage(id=chunk, doc_id=chunk.split("#")[0], chunk_index=0, title=chunk, source=f"{chunk}.md",
                   text=f"Fact from {chunk}.", score=0.8, origin="kb")


class Hops:
    """Retrieves the given chunks round by round; every answer but the last round's is judged not useful."""

    def __init__(self, rounds: list[list[str]]):
        self.rounds, self.seen = rounds, Counter()
        self.generated_from: list[list[str]] = []

    def retrieve(self, query, settings):
        self.seen["retrieve"] += 1
        return [passage(c) for c in self.rounds[min(self.seen["retrieve"], len(self.rounds)) - 1]]

    def grade(self, question, passages_or_answer, settings):
        if isinstance(passages_or_answer, str):
            useful = self.seen["retrieve"] >= len(self.rounds) + 1
            return AnswerGrade(score=0.9 if useful else 0.1, useful=useful, missing="" if useful else "more")
        self.seen["grade_documents"] += len(passages_or_answer)
        return Grading(grades=[{"id": p["id"], "label": "correct", "score": 0.9, "reason": "r"}
                               for p in passages_or_answer])

    def refine(self, question, passages, settings):
        return Refinement(strips=[strip(p["id"], 0.9 - 0.1 * self.seen["retrieve"], p["text"]) for p in passages])

    def generate(self, question, strips, settings, avoid=None, history=None):
        self.generated_from.append([s["id"] for s in strips])
        quote = strips[0]["text"]
        cite = {"ref": "doc_1", "doc_id": strips[0]["doc_id"], "title": "", "source": "", "quote": quote}
        return Draft(answer=f"{quote} [doc_1]", citations=[cite])

    def check(self, answer, strips, settings, question="", given=""):
        return GroundednessCheck(score=1.0, grounded=True)

    def rewrite(self, question, query, evidence, feedback, for_web, settings):
        self.seen["rewrite"] += 1
        return Rewrite(query=f"{query} hop{self.seen['rewrite']}", reason="next hop")

    available = False  # the web component too: never asked to search

    def search(self, query, settings):
        raise AssertionError("web search is unavailable")


def graph_of(fake, **kw):
    parts = Components(relevance=fake, refiner=fake, generator=fake, groundedness=fake, answer_grader=fake,
                       rewriter=fake, web=fake, retriever=fake)
    return build_graph(parts, **kw)


def test_a_second_hop_adds_to_the_first():
    fake = Hops([["a#0"], ["a#0", "b#0"]])
    result = graph_of(fake).invoke({"question": "q"}, context=Context(max_retrieval_rounds=3))
    # plain's draft, round 1's from the strips, round 2's from both hops
    assert fake.generated_from[:3] == [["a#0"], ["a#0"], ["a#0", "b#0"]]
    assert fake.seen["grade_documents"] == 2  # a#0 was graded once: round 2 graded only what was new
    refines = [s for s in result["trace"] if s["node"] == "refine"]
    assert [s["evidence_added"] for s in refines] == [1, 1]


def test_a_round_that_finds_nothing_new_ends_the_correction():
    fake = Hops([["a#0"], ["a#0"], ["b#0"]])
    result = graph_of(fake).invoke({"question": "q"}, context=Context(max_retrieval_rounds=3))
    assert fake.seen["retrieve"] == 2  # round 3 was never tried: round 2 could add nothing
    assert len(fake.generated_from) == 2  # plain's draft and round 1's
    retrieves = [s for s in result["trace"] if s["node"] == "retrieve"]
    assert "no new evidence, correction ends" in retrieves[-1]["reason"]
    assert result["trace"][-1]["node"] == "finalize"
    signals = graph_signals(result)
    assert signals["evidence_added"] == [1] and signals["rounds_useful"] == 1 and signals["stopped_nothing_new"]
    assert signals["yes_no_decided"] is False


def test_evidence_does_not_leak_into_the_next_run_of_a_thread():
    fake = Hops([["a#0"]])
    graph = graph_of(fake, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    graph.invoke({"question": "first"}, thread, context=Context(max_retrieval_rounds=1))
    assert [s["id"] for s in graph.get_state(thread).values["evidence"]] == ["a#0"]  # refined: not useful at first
    fake.rounds = [["b#0"]]
    graph.invoke({"question": "second"}, thread, context=Context(max_retrieval_rounds=1))
    assert fake.generated_from[-1] == ["b#0"]
    values = graph.get_state(thread).values
    # plain's draft answered the second question: nothing refined, and nothing of the first run's evidence left
    assert values["evidence"] == [] and values["seen"] == ["b#0"]


def test_the_rewrite_carries_the_name_the_first_hop_found():
    from selfcrag.offline.rewrite import KeywordRewriter

    question = "What office did the actress who played Ada Crane in Harbour Nights later hold?"
    first_hop = strip("k#0", 0.8, "Harbour Nights is a 1951 drama film starring Lena Marsh as the keeper Ada Crane. "
                                  "It was shot in Cornwall.")
    first_hop["title"] = "Harbour Nights (1951 film)"
    rewrite = KeywordRewriter().rewrite(question, question, [first_hop], "", False, Context())
    assert "Lena Marsh" in rewrite.query and "Lena Marsh" in rewrite.reason
    assert "Harbour Nights" not in rewrite.reason  # the first hop's own title finds only the first hop again
    assert "name the evidence gives" not in KeywordRewriter().rewrite(question, question, [], "", False,
                                                                      Context()).reason
