"""Yes/no and comparison answers decided by the evidence (offline/comparison.py), on hand-made evidence."""

from __future__ import annotations

import pytest

from selfcrag.context import Context
from selfcrag.contract import Strip
from selfcrag.knowledge.embeddings import default_embedder
from selfcrag.offline.comparison import decide, is_verdict
from selfcrag.offline.extractive import ExtractiveGenerator
from selfcrag.offline.groundedness import OfflineGroundednessChecker


def strip(doc: str, title: str, text: str, score: float = 0.8) -> Strip:
    return Strip(id=f"{doc}#0", doc_id=doc, title=title, source=f"{doc}.md", text=text, score=score)


MARA = strip("mara", "Mara Voss", "Mara Voss (born 3 May 1931) is a Dutch sculptor and painter. "
                                  "Her bronze figures stand in Utrecht.")
OLEK = strip("olek", "Olek Brandt", "Olek Brandt (born 1958) was a Dutch sculptor known for granite work. "
                                    "He taught in Leiden for 20 years.")
TIDE = strip("tide", "The Tide Review", "The Tide Review is a literary magazine founded in 1921. "
                                        "It prints 4,000 copies per issue.")
GULL = strip("gull", "Gull Quarterly", "Gull Quarterly is a poetry journal founded in 1967 in Bristol. "
                                       "Each issue has a print run of 12,500 copies.")
FERN = strip("fern", "Fernhill Lighthouse", "Fernhill Lighthouse is not a working light since 1990. "
                                            "The tower is 31 metres tall.")


@pytest.mark.parametrize(
    ("question", "strips", "verdict"),
    [
        ("Who was born first, Mara Voss or Olek Brandt?", [MARA, OLEK], "Mara Voss"),
        ("Who was born first, Olek Brandt or Mara Voss?", [OLEK, MARA], "Mara Voss"),  # option order is no vote
        ("Which is younger, Mara Voss or Olek Brandt?", [MARA, OLEK], "Olek Brandt"),
        ("Which was founded earlier, Gull Quarterly or The Tide Review?", [GULL, TIDE], "The Tide Review"),
        ("Which prints more copies, The Tide Review or Gull Quarterly?", [TIDE, GULL], "Gull Quarterly"),
        ("Which is a poetry journal, The Tide Review or Gull Quarterly?", [TIDE, GULL], "Gull Quarterly"),
        ("Were Mara Voss and Olek Brandt of the same nationality?", [MARA, OLEK], "Yes"),
        ("Are Mara Voss and Olek Brandt both sculptors?", [MARA, OLEK], "Yes"),
        ("Are The Tide Review and Gull Quarterly both magazines?", [TIDE, GULL], "No"),
        ("Is Gull Quarterly a poetry journal?", [TIDE, GULL], "Yes"),
        ("Is Fernhill Lighthouse a working light?", [FERN], "No"),  # a negated sentence flips the verdict
    ],
)
def test_the_evidence_decides(question, strips, verdict):
    decision = decide(question, strips)
    assert decision is not None and decision.verdict == verdict
    assert all(sentence in s["text"] for sentence, s in decision.support)  # deciding sentences are copied


@pytest.mark.parametrize(
    ("question", "strips"),
    [
        ("Who was born first, Mara Voss or Petra Lind?", [MARA, OLEK]),  # no evidence on one option
        ("Which is taller, Mara Voss or Olek Brandt?", [MARA, OLEK]),  # no height for either: no guess
        ("Is Gull Quarterly a novel?", [GULL]),  # the evidence never says so: no "no" either
        ("Isn't Gull Quarterly a poetry journal?", [GULL]),  # a negated question: a bare yes reads both ways
        ("Were Mara Voss and Petra Lind both sculptors?", [MARA, OLEK]),
        ("When was Gull Quarterly founded?", [GULL]),  # not a yes/no question at all
        ("Which magazine is older?", [TIDE, GULL]),  # no options named
    ],
)
def test_undecided_questions_get_no_verdict(question, strips):
    assert decide(question, strips) is None


def test_chinese_yes_no():
    shop = strip("shop", "付款方式", "本店支持货到付款。运费由买家承担。")
    assert decide("本店是否支持货到付款？", [shop]).verdict == "是"
    closed = strip("shop", "付款方式", "本店不支持货到付款。")
    assert decide("本店支持货到付款吗？", [closed]).verdict == "不是"


def test_verdict_sentences():
    assert is_verdict("Yes.") and is_verdict("No") and is_verdict("不是。")
    assert not is_verdict("Yes, it is.") and not is_verdict("Nobody.")


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


def test_a_verdict_answer_is_cited_and_grounded(embedder):
    settings = Context()
    draft = ExtractiveGenerator(embedder).generate("Who was born first, Mara Voss or Olek Brandt?", [MARA, OLEK],
                                                   settings)
    assert draft.answer.startswith("Mara Voss. Mara Voss (born 3 May 1931)")
    assert [c["doc_id"] for c in draft.citations] == ["mara", "olek"]
    assert "[doc_1]" in draft.answer and "[doc_2]" in draft.answer
    check = OfflineGroundednessChecker(embedder).check(draft.answer, [MARA, OLEK], settings)
    assert check.grounded and not check.unsupported

    yes = ExtractiveGenerator(embedder).generate("Is Gull Quarterly a poetry journal?", [GULL], settings)
    assert yes.answer.startswith("Yes. Gull Quarterly is a poetry journal")
    assert OfflineGroundednessChecker(embedder).check(yes.answer, [GULL], settings).grounded
    # "Yes." is no claim of its own, but it does not make an invented sentence after it grounded.
    made_up = OfflineGroundednessChecker(embedder).check("Yes. Gull Quarterly is printed in Paris. [doc_1]", [GULL],
                                                          settings)
    assert not made_up.grounded
