"""Every abstention says why (`finalize.missing_evidence`), in the question's language, even when no check named
a gap: a grounded answer judged unclear, no answer at all, or a question with no word to look up."""

from __future__ import annotations

from selfcrag.contract import Strip
from selfcrag.nodes.finalize import missing_evidence
from selfcrag.prompts import messages

E1042 = Strip(id="error_codes#0", doc_id="error_codes", title="Error codes", source="error_codes.md",
              text="`E1042` — Your payment was declined by your bank or card issuer.", score=0.9)


def test_a_grounded_answer_no_check_faulted_says_it_does_not_clearly_answer() -> None:
    state = {"question": "What does E1042 mean?", "knowledge": [E1042], "grounded": True,
             "answer": "Here is what each code means and how to fix it. [doc_1]"}
    assert missing_evidence(state) == messages.phrase("unclear_answer", "en")
    chinese = state | {"question": "E1042 是什么意思？"}
    assert missing_evidence(chinese) == messages.phrase("unclear_answer", "zh")


def test_no_answer_and_no_named_gap_says_no_passage_supports_one() -> None:
    assert missing_evidence({"question": "What does E1042 mean?", "knowledge": [E1042], "answer": ""}) == \
        messages.phrase("no_supported_answer", "en")
    # Only question words: no term to name as absent from the knowledge base.
    assert missing_evidence({"question": "What is it?", "knowledge": [], "documents": []}) == \
        messages.phrase("no_supported_answer", "en")


def test_a_named_gap_still_comes_first() -> None:
    state = {"question": "What does E1042 mean?", "knowledge": [E1042], "answer": "x", "grounded": True,
             "feedback": "does not mention: e1042"}
    assert missing_evidence(state) == "does not mention: e1042"


def test_an_answer_the_floor_withheld_says_so_and_keeps_a_named_gap() -> None:
    floor = messages.below_floor(0.64, "medical", 0.95 - 0.15)
    assert floor == "the answer found has a confidence of 0.64, below the medical domain's floor of 0.80"
    state = {"question": "How long do refunds take?", "answer": "Five days. [doc_1]", "knowledge": [{"id": "r#0"}]}
    assert missing_evidence(state, floor) == floor  # no check named a gap: the floor is what withheld it
    assert messages.withheld(floor, floor) == f"I can't answer this with enough confidence: {floor}."
    assert messages.withheld(floor, "no number in the answer") == (
        f"I can't answer this with enough confidence: {floor}. Missing: no number in the answer.")
