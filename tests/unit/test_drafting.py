"""Drafting beyond the strips (offline/drafting.py): which passages are read whole after a decline, which name a
draft's bridge, when a longer draft extends the first, and the order of the generator's calls."""

from __future__ import annotations

import pytest
from support.bridge import BRIDGE_QUESTION, SERIES, SHOW, flat_similarity

from selfcrag.context import Context
from selfcrag.contract import Draft, Passage, Strip
from selfcrag.offline.drafting import (
    RunEvidence,
    bridge_passages,
    extends,
    quotes_evidence,
    whole_passages,
    write_draft,
)
from selfcrag.offline.extractive import ExtractiveGenerator
from selfcrag.text.terms import key_terms


def passage(chunk: str, text: str, score: float = 0.8, title: str = "") -> Passage:
    return Passage(id=chunk, doc_id=chunk.split("#")[0], chunk_index=0, title=title, source=f"{chunk}.md",
                   text=text, score=score, origin="kb")


def strip(chunk: str, text: str, score: float) -> Strip:
    return Strip(id=chunk, doc_id=chunk.split("#")[0], title="", source=f"{chunk}.md", text=text, score=score)


def draft(answer: str, **more) -> Draft:
    return Draft(answer=answer, citations=[], **more)


FIRST = "Harbour Nights is a 1951 drama film. It starred Lena Marsh as the keeper."
SECOND = "Lena Marsh (1920-1990) was an English actress. She later served as Mayor of Penzance."


# --- whole passages ---------------------------------------------------------------------------------------------
def test_whole_passages_are_the_relevant_ones_scored_as_their_best_strip():
    first_sentence = strip("a#0", "Harbour Nights is a 1951 drama film.", 0.7)
    run = RunEvidence(question="Who starred in Harbour Nights?", knowledge=[first_sentence],
                      evidence=[first_sentence, strip("a#0", "It starred Lena Marsh as the keeper.", 0.5)],
                      sources=[passage("a#0", FIRST)])
    whole = whole_passages(run)
    assert [(s["id"], s["text"], s["score"]) for s in whole] == [("a#0", FIRST, 0.7)]
    # nothing more to read than the knowledge already holds
    assert whole_passages(RunEvidence(question=run.question, knowledge=whole, sources=run.sources)) == []


def test_a_passage_without_strips_scores_as_its_grade_and_the_best_comes_first():
    run = RunEvidence(question="Who starred in Harbour Nights?", knowledge=[],
                      evidence=[strip("a#0", "Harbour Nights is a 1951 drama film.", 0.4)],
                      grades=[{"id": "b#0", "label": "ambiguous", "score": 0.61234, "reason": "r"}],
                      sources=[passage("a#0", FIRST), passage("b#0", SECOND), passage("c#0", "Penzance.", 0.2)])
    assert [(s["id"], s["score"]) for s in whole_passages(run)] == [("b#0", 0.6123), ("a#0", 0.4), ("c#0", 0.2)]


def test_a_set_aside_passage_joins_only_when_it_names_a_key_term_the_relevant_ones_lack():
    assert "lena" in key_terms("Which office did Lena Marsh of Harbour Nights hold?").values()
    aside = [passage("b#0", SECOND, 0.3)]
    run = RunEvidence(question="Which office did the star of Harbour Nights hold?", knowledge=[],
                      sources=[passage("a#0", FIRST)], set_aside=aside)
    assert [s["id"] for s in whole_passages(run)] == ["a#0"]  # the relevant passage names every key term
    run = RunEvidence(question="Which office did the Cornwall star of Harbour Nights hold?", knowledge=[],
                      sources=[passage("a#0", FIRST)], set_aside=aside)
    assert [s["id"] for s in whole_passages(run)] == ["a#0"]  # "Cornwall" is in no passage: nothing to add
    run = RunEvidence(question="Which office did Lena Marsh of Harbour Nights hold?", knowledge=[],
                      sources=[passage("a#0", "Harbour Nights is a 1951 drama film shot in Cornwall.")],
                      set_aside=aside)
    assert [s["id"] for s in whole_passages(run)] == ["a#0", "b#0"]  # b#0 is the passage on Lena Marsh


# --- the bridge -------------------------------------------------------------------------------------------------
def test_bridge_passages_name_a_name_the_draft_gives_and_the_question_lacks():
    first_hop = strip("a#0", SERIES, 0.9)
    unrelated = passage("c#0", "Medical dramas aired on every network in the 1990s.")
    run = RunEvidence(question=BRIDGE_QUESTION, knowledge=[first_hop], sources=[passage("a#0", SERIES)],
                      set_aside=[unrelated, passage("b#0", SHOW)])
    said = draft(f"{SERIES.split('. ')[0]}. [doc_1]")
    found = bridge_passages(run, said, [first_hop])
    assert [(s["id"], s["text"], s["score"]) for s in found] == [("b#0", SHOW, 0.0)]
    # a passage already in the knowledge is not read again
    assert bridge_passages(run, said, [first_hop, strip("b#0", SHOW, 0.3)]) == []
    # a draft naming only what the question names has no bridge
    assert bridge_passages(run, draft('"Human Error" is a season finale. [doc_1]'), [first_hop]) == []


def test_a_bridge_passage_may_name_it_in_its_title_only():
    run = RunEvidence(question=BRIDGE_QUESTION, knowledge=[],
                      set_aside=[passage("b#0", "It originally ran on the Fox network.", title="House")])
    assert [s["id"] for s in bridge_passages(run, draft(SERIES), [])] == ["b#0"]


def test_a_longer_draft_extends_the_first_only_when_it_starts_with_it():
    first = draft("House is a drama. [doc_1]")
    assert extends(first, draft("House is a drama. [doc_1] It ran on Fox. [doc_2]"))
    assert not extends(first, draft("House is a drama. [doc_2]"))  # the same answer adds nothing
    assert not extends(first, draft("It ran on Fox. [doc_2] House is a drama. [doc_1]"))  # the first hop moved
    assert not extends(draft(""), draft("It ran on Fox. [doc_2]"))  # nothing to extend


def test_only_the_extractive_generator_quotes_evidence():
    assert quotes_evidence(ExtractiveGenerator(embedder=None))  # type: ignore[arg-type]
    # A generator whose drafts cost no model call is not thereby one that quotes: the generator's kind decides.
    assert not quotes_evidence(Scripted([draft("House is a drama.", llm_calls=0)]))  # type: ignore[arg-type]


# --- the calls --------------------------------------------------------------------------------------------------
class Scripted:
    """Returns the given drafts in turn and records the evidence texts of each call."""

    def __init__(self, drafts: list[Draft]) -> None:
        self.drafts, self.read = list(drafts), []

    def generate(self, question, strips, settings, avoid=None, history=None):
        self.read.append([s["text"] for s in strips])
        return self.drafts.pop(0)


def declined_run() -> RunEvidence:
    knowledge = [strip("a#0", "Harbour Nights is a 1951 drama film.", 0.7)]
    return RunEvidence(question="Which keeper did Lena Marsh play in Harbour Nights?", knowledge=knowledge,
                       evidence=knowledge, sources=[passage("a#0", FIRST)])


def test_a_decline_on_the_strips_is_written_again_from_the_passages_whole():
    answer = draft("It starred Lena Marsh as the keeper. [doc_1]")
    generator = Scripted([draft("", missing="no passage mentions: lena"), answer])
    made = write_draft(generator, declined_run(), Context(), [], [], budget_left=True)  # type: ignore[arg-type]
    assert generator.read == [["Harbour Nights is a 1951 drama film."], [FIRST]]
    assert made.draft is answer and made.whole is answer and made.extension is None
    assert [s["text"] for s in made.knowledge or []] == [FIRST] and made.whole_passages == 1
    assert made.notes == ["declined on the strips (no passage mentions: lena), so read 1 relevant passages whole"]


@pytest.mark.parametrize("first, budget_left", [
    (draft("", missing="the evidence is about another film", off_target=True), True),  # more of it cannot help
    (draft("", missing="the model is unreachable", error="timeout"), True),  # a fault is not a decline
    (draft("", missing="no passage mentions: lena"), False),  # no model calls left
])
def test_some_declines_stand(first, budget_left):
    generator = Scripted([first])
    made = write_draft(generator, declined_run(), Context(), [], [], budget_left=budget_left)  # type: ignore[arg-type]
    assert len(generator.read) == 1 and made.draft is first and made.whole is None
    assert made.knowledge is None and made.whole_passages == 0 and made.notes == []


def test_a_failed_second_reading_is_the_draft_and_a_second_decline_is_not():
    failed = draft("", missing="the model is unreachable", error="timeout")
    made = write_draft(Scripted([draft("", missing="m"), failed]), declined_run(), Context(), [], [],  # type: ignore[arg-type]
                       budget_left=True)  # fmt: skip
    assert made.draft is failed and made.knowledge is None and made.whole_passages == 0
    first = draft("", missing="no passage mentions: lena")
    made = write_draft(Scripted([first, draft("", missing="other")]), declined_run(), Context(), [], [],  # type: ignore[arg-type]
                       budget_left=True)  # fmt: skip
    assert made.draft is first and made.whole is not None and len(made.notes) == 1


def test_a_model_draft_is_not_extended_by_the_bridge(monkeypatch):
    """A generator that is not the extractive one writes once, though its draft names a bridge and cost no call."""
    run = RunEvidence(question=BRIDGE_QUESTION, knowledge=[strip("a#0", SERIES, 0.9)],
                      set_aside=[passage("b#0", SHOW)])
    generator = Scripted([draft(SERIES.split(". ")[0] + ". [doc_1]"), draft("never asked")])
    made = write_draft(generator, run, Context(), [], [], budget_left=True)  # type: ignore[arg-type]
    assert len(generator.read) == 1 and made.extension is None and not made.second_hop


def test_the_extractive_draft_grows_by_the_second_hop(monkeypatch):
    flat_similarity(monkeypatch)
    run = RunEvidence(question=BRIDGE_QUESTION, knowledge=[strip("a#0", SERIES, 0.9)],
                      sources=[passage("a#0", SERIES)], set_aside=[passage("b#0", SHOW)])
    made = write_draft(ExtractiveGenerator(embedder=None), run, Context(), [], [], budget_left=True)  # type: ignore[arg-type]
    assert made.first.answer.startswith('"Human Error" is the season finale') and "Fox" not in made.first.answer
    assert made.second_hop and made.draft is made.extension and "ran on the Fox network" in made.draft.answer
    assert [s["id"] for s in made.knowledge or []] == ["a#0", "b#0"]
    assert made.notes == ["added the second hop from 1 passages naming the bridge"] and made.whole_passages == 0
