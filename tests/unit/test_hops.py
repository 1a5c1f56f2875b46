"""Multi-hop answering: generation reads whole passages (and the other hop's) before declining on the strips, the
run shows its most confident grounded draft, and HaluEval's glued knowledge splits back into its paragraphs."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

from support.bridge import BRIDGE_QUESTION, SERIES, SHOW, flat_similarity

from selfcrag import Components, Context, build_graph
from selfcrag.contract import AnswerGrade, Draft, Grading, GroundednessCheck, Passage, Refinement, Rewrite
from selfcrag.evaluation.signals import graph_signals
from selfcrag.offline.extractive import ExtractiveGenerator
from selfcrag.quality.drafts import as_judged, snapshot

ROOT = Path(__file__).resolve().parents[2]


def passage(chunk: str, text: str, score: float = 0.8) -> Passage:
    return Passage(id=chunk, doc_id=chunk.split("#")[0], chunk_index=0, title="", source=f"{chunk}.md", text=text,
                   score=score, origin="kb")


def strip(chunk: str, text: str, score: float) -> dict:
    return {"id": chunk, "doc_id": chunk.split("#")[0], "title": "", "source": f"{chunk}.md", "text": text,
            "score": score}


FIRST = "Harbour Nights is a 1951 drama film. It starred Lena Marsh as the keeper."
SECOND = "Lena Marsh (1920-1990) was an English actress. She later served as Mayor of Penzance."


class TwoHops:
    """One passage per round; the refiner keeps only the first sentence of each; answers are judged useful only
    with `useful_from` in them; the generator is the real extractive one."""

    available = False  # the web component too: never asked to search

    def search(self, query, settings):
        raise AssertionError("web search is unavailable")

    def __init__(self, rounds: list[Passage], relevance: dict[str, float]):
        self.rounds, self.relevance, self.seen = rounds, relevance, Counter()
        self.generator = ExtractiveGenerator(embedder=None)  # type: ignore[arg-type]
        self.generated_from: list[list[str]] = []

    def retrieve(self, query, settings):
        self.seen["retrieve"] += 1
        return [self.rounds[min(self.seen["retrieve"], len(self.rounds)) - 1]]

    def grade(self, question, passages_or_answer, settings):
        if isinstance(passages_or_answer, str):
            score = max((v for k, v in self.relevance.items() if k in passages_or_answer), default=0.1)
            return AnswerGrade(score=score, useful=score >= 0.7, missing="" if score >= 0.7 else "the office")
        return Grading(grades=[{"id": p["id"], "label": "correct", "score": 0.9, "reason": "r"}
                               for p in passages_or_answer])

    def refine(self, question, passages, settings):
        return Refinement(strips=[strip(p["id"], p["text"].split(". ")[0] + ".", 0.8) for p in passages])

    def generate(self, question, strips, settings, avoid=None, history=None):
        self.generated_from.append([s["text"] for s in strips])
        if len(self.generated_from) == 1:  # plain's single-pass draft finds nothing: these tests are of the correction
            return Draft(answer="", citations=[], missing="scripted: plain's draft declines")
        return self.generator.generate(question, strips, settings, avoid)

    def check(self, answer, strips, settings, question="", given=""):
        return GroundednessCheck(score=1.0, grounded=all(part.split(" [")[0] in " ".join(s["text"] for s in strips)
                                                         for part in [answer]))

    def rewrite(self, question, query, evidence, feedback, for_web, settings):
        self.seen["rewrite"] += 1
        return Rewrite(query=f"{query} hop{self.seen['rewrite']}", reason="next hop")


class DeclinesFirst(ExtractiveGenerator):
    """The extractive generator, except that its first draft (plain's single pass) finds nothing, so the run takes
    the correction path."""

    calls = 0

    def generate(self, question, strips, settings, avoid=None, history=None):
        self.calls += 1
        if self.calls == 1:
            return Draft(answer="", citations=[], missing="scripted: plain's draft declines")
        return super().generate(question, strips, settings, avoid, history)


def graph_of(fake, generator=None):
    parts = Components(relevance=fake, refiner=fake, generator=generator or fake, groundedness=fake,
                       answer_grader=fake, rewriter=fake, web=fake, retriever=fake)
    return build_graph(parts)


def test_a_decline_on_the_strips_reads_the_passages_whole(monkeypatch):
    import selfcrag.offline.extractive as extractive

    monkeypatch.setattr(extractive, "similarity_or_stand_in", lambda *a: 0.9)  # no embedder in a unit test
    monkeypatch.setattr(extractive, "embed", lambda *args: __import__("numpy").ones((len(args[1]), 2)))
    fake = TwoHops([passage("a#0", FIRST)], {"Lena Marsh": 0.9})
    result = graph_of(fake).invoke({"question": "Which keeper did Lena Marsh play in Harbour Nights?"},
                                   context=Context(max_retrieval_rounds=1))
    generations = [s for s in result["trace"] if s["node"] == "generate"]
    assert "read 1 relevant passages whole" in generations[0]["reason"]
    assert generations[0]["decision"] == "draft" and generations[0]["whole_passages"] == 1
    assert fake.generated_from[:3] == [[FIRST], ["Harbour Nights is a 1951 drama film."], [FIRST]]  # plain's first
    assert "Lena Marsh" in result["answer"]
    assert graph_signals(result)["whole_passage_drafts"] == 1


def test_an_off_target_decline_stands():
    class OffTarget(TwoHops):
        def generate(self, question, strips, settings, avoid=None, history=None):
            self.generated_from.append([s["text"] for s in strips])
            return Draft(answer="", citations=[], missing="the evidence is about another plan", off_target=True)

    fake = OffTarget([passage("a#0", FIRST)], {})
    result = graph_of(fake).invoke({"question": "Who starred in Harbour Nights?"},
                                   context=Context(max_retrieval_rounds=1))
    assert len(fake.generated_from) == 2 and result["decision"] == "abstain"  # plain's draft, then the strips


def test_the_run_shows_its_most_confident_grounded_draft_not_the_last():
    class Drafts(TwoHops):
        def generate(self, question, strips, settings, avoid=None, history=None):
            self.generated_from.append([s["text"] for s in strips])
            if len(self.generated_from) == 1:
                return Draft(answer="", citations=[], missing="scripted: plain's draft declines")
            newest = self.rounds[self.seen["retrieve"] - 1]["id"]  # quote the strip this round found
            chosen = next(s for s in strips if s["id"] == newest)
            quote = chosen["text"]
            cite = {"ref": "doc_1", "doc_id": chosen["doc_id"], "title": "", "source": "", "quote": quote}
            return Draft(answer=f"{quote} [doc_1]", citations=[cite])

    # Round 1's draft nearly answers (relevance 0.65, below the 0.7 a useful answer needs); round 2's is worse.
    fake = Drafts([passage("a#0", FIRST), passage("b#0", "Penzance is a town in Cornwall.")], {"Harbour": 0.65})
    result = graph_of(fake).invoke({"question": "Who starred in Harbour Nights?"},
                                   context=Context(max_retrieval_rounds=2, min_confidence=0.99))
    closing = result["trace"][-1]  # a floor no draft reaches: both rounds run, and the better draft is the one held
    assert closing["draft"].startswith("Harbour Nights is a 1951 drama film.")
    assert [d["round"] for d in closing["candidates"]] == [1, 2]  # plain's draft declined: round 1's, round 2's
    assert [d.get("shown", False) for d in closing["candidates"]] == [True, False]
    assert closing["candidates"][0]["confidence"] > closing["candidates"][1]["confidence"]
    signals = graph_signals(result)
    assert signals["drafts_kept"] == 2 and signals["shown_draft_round"] == 1
    assert signals["whole_passage_drafts"] == 0


def test_a_draft_is_judged_with_its_own_evidence():
    state = {"answer": "A. [doc_1]", "citations": [{"doc_id": "a"}], "knowledge": [strip("a#0", "A.", 0.9)],
             "answer_relevance": 0.8, "grounded": True, "retrieval_rounds": 1, "generations": 1, "trace": [1]}
    kept = snapshot(state, plain=False)
    later = {**state, "answer": "", "citations": [], "knowledge": [strip("b#0", "B.", 0.2)], "trace": [1, 2]}
    view = as_judged(later, kept)
    assert view["knowledge"] == state["knowledge"] and view["answer"] == "A. [doc_1]" and view["trace"] == [1, 2]


def load_eval_datasets():
    spec = importlib.util.spec_from_file_location("eval_datasets", ROOT / "benchmarks" / "eval_datasets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_haluevals_glued_paragraphs_split_at_the_glue_only():
    split_glued = load_eval_datasets().split_glued
    assert split_glued("It was published in the 19th century.First for Women is a magazine.") == [
        "It was published in the 19th century.", "First for Women is a magazine."]
    assert split_glued("He died in 1989.James Miller was a singer.") == ["He died in 1989.",
                                                                         "James Miller was a singer."]
    assert split_glued('It is known as "Dirt" (1992).Sébastien won.') == ['It is known as "Dirt" (1992).',
                                                                          "Sébastien won."]
    for whole in ("He studied in the U.S.A. and got a Ph.D. at Yale.", "It has 1.2 billion people. It is big.",
                  "The race was won by e.Dams drivers.", "One paragraph only."):
        assert split_glued(whole) == [whole]


# --- bridge questions: the second hop ---------------------------------------------------------------------------


def test_the_generator_adds_the_sentence_about_the_bridge(monkeypatch):
    flat_similarity(monkeypatch)
    question = BRIDGE_QUESTION
    strips = [strip("a#0", SERIES, 0.9), strip("b#0", SHOW, 0.3)]
    draft = ExtractiveGenerator(embedder=None).generate(question, strips, Context())  # type: ignore[arg-type]
    assert draft.answer.startswith('"Human Error" is the season finale')
    assert "ran on the Fox network" in draft.answer and [c["doc_id"] for c in draft.citations] == ["a", "b"]
    # Without a passage naming the bridge ("House"), nothing is added: a sentence of an unrelated passage is not
    # the second hop however many question terms it covers.
    other = strip("c#0", "Medical dramas aired on every network in the 1990s.", 0.3)
    draft = ExtractiveGenerator(embedder=None).generate(question, [strips[0], other], Context())  # type: ignore[arg-type]
    assert len(draft.citations) == 1


def test_generate_extends_a_draft_with_the_passage_naming_its_bridge(monkeypatch):
    flat_similarity(monkeypatch)
    fake = TwoHops([passage("a#0", SERIES)], {"Fox": 0.9})
    fake.refine = lambda question, passages, settings: Refinement(strips=[strip(p["id"], p["text"], 0.8)
                                                                          for p in passages])
    def grade(question, graded, settings):
        if isinstance(graded, str):
            return AnswerGrade(score=0.9 if "Fox" in graded else 0.2, useful="Fox" in graded)
        labels = {"a#0": "correct"}  # the show's own passage reads as off-topic to the question
        return Grading(grades=[{"id": p["id"], "label": labels.get(p["id"], "incorrect"), "score": 0.9,
                                "reason": "r"} for p in graded])

    fake.grade = grade
    fake.rounds = [[passage("a#0", SERIES), passage("b#0", SHOW)]]
    fake.retrieve = lambda query, settings: fake.rounds[0]
    question = BRIDGE_QUESTION
    # The extractive generator itself: only an answer of quoted sentences is extended (drafting.quotes_evidence).
    result = graph_of(fake, DeclinesFirst(embedder=None)).invoke({"question": question},
                                                                  context=Context(max_retrieval_rounds=1))
    step = next(s for s in result["trace"] if s["node"] == "generate")
    assert step["second_hop"] and "naming the bridge" in step["reason"]
    assert "Fox network" in result["answer"] or "Fox network" in result["trace"][-1]["draft"]


def test_a_correction_round_keeps_the_passage_naming_the_rewrites_bridge():
    from selfcrag.nodes.refine import second_hops

    state = {"bridges": ["Lena Marsh"], "documents": [passage("b#0", SECOND), passage("c#0", "Penzance is a town.")]}
    assert second_hops(state, set()) == {"b#0": "Lena Marsh"}
    assert second_hops(state, {"b#0"}) == {}  # already kept by its grade
    assert second_hops({**state, "bridges": []}, set()) == {}
