"""Speculative generation's rules, on plain state: when a run drafts while grading (`routing.speculates`), and
when the draft may stand for the answer `generate` would write (`speculate.discard_reason`)."""

from __future__ import annotations

from typing import Any

from selfcrag import Context
from selfcrag.contract import Citation, Passage, Strip
from selfcrag.nodes.speculate import discard_reason
from selfcrag.routing import after_adopt, after_grading_or_join, fan_out, speculates


def passage(doc: str, score: float) -> Passage:
    return Passage(id=f"{doc}#0", doc_id=doc, chunk_index=0, title=doc, source=f"{doc}.md", text=f"About {doc}.",
                   score=score, origin="kb")  # type: ignore[typeddict-item]  # fmt: skip


def strip(doc: str, text: str, score: float = 0.9) -> Strip:
    return Strip(id=f"{doc}#0", doc_id=doc, title=doc, source=f"{doc}.md", text=text, score=score)


def cite(ref: str, doc: str) -> Citation:
    return Citation(ref=ref, doc_id=doc, title=doc, source=f"{doc}.md", quote="")


RETURNS, ELECTRONICS, SHIPPING = (strip("returns", "Items can be returned within 30 days."),
                                  strip("electronics", "Electronics have a 15-day window.", 0.8),
                                  strip("shipping", "Express shipping takes 1 to 2 days.", 0.7))  # fmt: skip


def after_grading(action: str = "correct", written: list[Strip] | None = None, citations: list[Citation] | None = None,
                  **draft: Any) -> dict[str, Any]:  # fmt: skip
    """The state `adopt_draft` sees: grading's action, and a draft written from `written` (S)."""
    written = [RETURNS, ELECTRONICS, SHIPPING] if written is None else written
    speculation = {"answer": "Within 30 days [doc_1].", "citations": [cite("doc_1", "returns")] if citations is None
                   else citations, "missing": "", "strips": written, "error": "", **draft}  # fmt: skip
    return {"question": "How many days do I have to return an item?", "crag_action": action,
            "speculation": speculation, "retrieval_rounds": 1}  # fmt: skip


SETTINGS = Context()


# --- keep or discard -------------------------------------------------------------------------------------------------


def test_a_draft_written_from_exactly_the_refined_evidence_is_kept():
    assert discard_reason(after_grading(), [RETURNS, ELECTRONICS, SHIPPING], SETTINGS) == ""


def test_a_draft_from_a_superset_is_kept_when_it_cites_only_kept_documents_under_their_labels():
    # shipping was graded incorrect: the draft saw its strip too, but cites returns, still doc_1 without it.
    assert discard_reason(after_grading(), [RETURNS, ELECTRONICS], SETTINGS) == ""
    cited = after_grading(citations=[cite("doc_1", "returns"), cite("doc_2", "electronics")])
    assert discard_reason(cited, [RETURNS, ELECTRONICS], SETTINGS) == ""


def test_a_draft_citing_a_document_graded_incorrect_is_discarded():
    state = after_grading(citations=[cite("doc_3", "shipping")])
    assert "cites doc_3" in discard_reason(state, [RETURNS, ELECTRONICS], SETTINGS)


def test_a_draft_whose_label_would_name_another_document_is_discarded():
    # returns (doc_1 in the draft) was graded incorrect: electronics becomes doc_1, so the draft's doc_2 is doc_1.
    state = after_grading(citations=[cite("doc_2", "electronics")])
    assert "cites doc_2" in discard_reason(state, [ELECTRONICS, SHIPPING], SETTINGS)


def test_a_draft_that_did_not_see_every_refined_strip_is_discarded():
    # A strip that the dropped passages had crowded out of the draft's evidence enters the refined evidence.
    later = strip("electronics", "Opened electronics are refunded minus 10%.", 0.6)
    reason = discard_reason(after_grading(), [RETURNS, ELECTRONICS, later], SETTINGS)
    assert reason == "1 of the 3 refined strips were not in the draft's evidence"


def test_a_draft_is_discarded_unless_grading_says_correct():
    for action in ("ambiguous", "incorrect"):
        assert f"grading chose '{action}'" in discard_reason(after_grading(action), [RETURNS], SETTINGS)


def test_a_draft_is_discarded_when_the_refined_evidence_would_be_corrected_before_generating():
    weak = [strip("returns", "Items can be returned within 30 days.", 0.3)]  # under the pre-generation gate
    state = {**after_grading(written=weak), "retrieval_rounds": 1}
    assert "would not go straight to generation" in discard_reason(state, weak, SETTINGS)


def test_a_failed_or_missing_draft_is_discarded_and_an_insufficient_one_is_kept():
    failed = after_grading(answer="", citations=[], error="HTTP 400: bad request")
    assert discard_reason(failed, [RETURNS], SETTINGS) == "the speculative draft failed (HTTP 400: bad request)"
    assert discard_reason({**after_grading(), "speculation": {}}, [RETURNS], SETTINGS) == "no speculative draft"
    # The model found too little in more evidence than generation would get: asking again repeats it.
    insufficient = after_grading(answer="", citations=[], missing="the return window")
    assert discard_reason(insufficient, [RETURNS], SETTINGS) == ""


# --- when to speculate -----------------------------------------------------------------------------------------------


def retrieved(best: float, rounds: int = 1) -> dict[str, Any]:
    return {"question": "How many days do I have to return an item?", "retrieval_rounds": rounds,
            "documents": [passage("returns", best), passage("shipping", 0.4)]}  # fmt: skip


def test_strong_first_round_retrieval_on_the_model_backend_speculates():
    assert speculates(retrieved(0.8), SETTINGS, model_backend=True)
    assert fan_out(retrieved(0.8), SETTINGS, True) == ["grade_documents", "speculate"]
    assert after_grading_or_join({**retrieved(0.8), "crag_action": "incorrect"}, SETTINGS, True) == "adopt_draft"


def test_no_speculation_offline_when_off_on_later_rounds_or_with_a_model_refiner():
    assert not speculates(retrieved(0.8), SETTINGS, model_backend=False)
    assert not speculates(retrieved(0.8), Context(speculate=False), model_backend=True)
    assert not speculates(retrieved(0.8, rounds=2), SETTINGS, model_backend=True)
    assert not speculates(retrieved(0.8), Context(refine_with="llm"), model_backend=True)  # strips need a call
    assert fan_out(retrieved(0.8), SETTINGS, False) == "grade_documents"
    assert after_grading_or_join({**retrieved(0.8), "crag_action": "correct"}, SETTINGS, False) == "refine"


def test_the_bar_is_the_minimum_context_relevance_of_the_domain():
    assert speculates(retrieved(0.70), SETTINGS, True) and not speculates(retrieved(0.69), SETTINGS, True)
    assert not speculates(retrieved(0.8), Context(domain="financial"), True)  # .85 there
    assert speculates(retrieved(0.8), Context(min_context_relevance=0.8), True)


def test_no_speculation_unless_the_budget_holds_the_whole_happy_path():
    assert speculates(retrieved(0.8), Context(max_llm_calls=5), True)  # the route, grading, draft, two checks
    assert not speculates(retrieved(0.8), Context(max_llm_calls=4), True)
    assert not speculates(retrieved(0.8), Context(grading="parallel", max_llm_calls=5), True)  # 2 grading calls


def test_after_the_join_a_kept_draft_goes_to_the_checks_and_a_discarded_one_down_the_normal_path():
    kept = {**retrieved(0.8), "speculation": {"kept": True}, "answer": "Within 30 days [doc_1].",
            "crag_action": "correct"}  # fmt: skip
    assert after_adopt(kept, SETTINGS) == ["check_hallucination", "grade_answer"]
    assert after_adopt({**kept, "answer": ""}, SETTINGS) == "rewrite_query"  # insufficient: correct again
    discarded = {**kept, "speculation": {"kept": False}}
    assert after_adopt(discarded, SETTINGS) == "refine"
    assert after_adopt({**discarded, "crag_action": "incorrect"}, SETTINGS) == "rewrite_query"
