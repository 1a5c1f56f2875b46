"""What a real 0.5B model replied that scripted models never did (tests/integration/test_real_model.py meets it):
an empty list of grades, an answer without citation labels, a decline it gave little probability to. Each is
handled by a general means, tested here."""

from __future__ import annotations

import math

import pytest
from langchain_core.messages import AIMessage
from pydantic import ValidationError

from selfcrag.context import Context
from selfcrag.contract import Strip
from selfcrag.llm.answer_grade import MISSING_CHARS, REASON_CHARS, AnswerVerdict
from selfcrag.llm.declines import doubted_decline
from selfcrag.llm.generator import draft_from
from selfcrag.llm.relevance import keyed_grades
from selfcrag.llm.structured import compact_schema
from selfcrag.prompts.generation import generation_prompt


def strip(doc: str, text: str, score: float) -> Strip:
    return Strip(id=f"{doc}#0", doc_id=doc, title=doc.title(), source=f"{doc}.md", text=text, score=score)


def test_the_batch_schema_requires_a_verdict_for_every_passage_so_a_grammar_cannot_skip_one():
    schema = compact_schema(keyed_grades(3))
    assert schema["required"] == ["p1", "p2", "p3"]
    assert schema["properties"]["p2"]["properties"]["label"]["enum"] == ["correct", "ambiguous", "incorrect"]
    with pytest.raises(ValidationError):
        keyed_grades(3).model_validate({"grades": []})  # what the 0.5B model said to a list schema


def test_list_replies_from_servers_without_a_grammar_are_matched_by_id_else_by_position():
    by_id = keyed_grades(2).model_validate({"grades": [{"id": "P2", "label": "Relevant"}, {"id": "p1", "label": "no"}]})
    assert (by_id.p1.label, by_id.p2.label) == ("incorrect", "correct")  # type: ignore[attr-defined]
    in_order = keyed_grades(2).model_validate([{"label": "correct"}, {"label": "ambiguous"}])
    assert (in_order.p1.label, in_order.p2.label) == ("correct", "ambiguous")  # type: ignore[attr-defined]


def test_an_answer_without_labels_is_attributed_to_the_document_it_shares_terms_with():
    strips = [strip("shipping", "Express shipping costs $14.99 and arrives in 2 business days.", 0.9),
              strip("returns", "Most items can be returned within 30 days from the date of delivery.", 0.8)]
    prompt = generation_prompt("How many days do I have to return an item?", strips, Context())
    draft = draft_from("You can return most items within 30 days from the date of delivery. Have a nice day!", prompt)
    assert draft.answer == ("You can return most items within 30 days from the date of delivery [doc_2]. "
                            "Have a nice day!")  # fmt: skip
    assert [(c["ref"], c["doc_id"]) for c in draft.citations] == [("doc_2", "returns")]


def test_an_answer_with_labels_keeps_them_as_written():
    prompt = generation_prompt("How much is express?", [strip("shipping", "Express shipping costs $14.99.", 0.9)],
                               Context())  # fmt: skip
    draft = draft_from("It costs $14.99 [doc_1].", prompt)
    assert draft.answer == "It costs $14.99 [doc_1]." and len(draft.citations) == 1


def first_token(*options: tuple[str, float, int]) -> AIMessage:
    top = [{"token": token, "logprob": math.log(p), "id": ident} for token, p, ident in options]
    return AIMessage("Insufficient: ...", response_metadata={"logprobs": {"content": [{"top_logprobs": top}]}})


def test_a_decline_holding_under_half_the_first_token_probability_is_doubted_and_its_tokens_banned():
    # As the 0.5B model replied to evidence that states the answer.
    message = first_token(("Ins", 0.355, 641), ("The", 0.152, 785), ("Missing", 0.036, 35312), ("INS", 0.01, 9972))
    assert doubted_decline(message) == {641: -100, 35312: -100, 9972: -100}


def test_a_sure_decline_or_one_without_probabilities_or_token_ids_stands():
    assert doubted_decline(first_token(("Ins", 0.7, 641), ("The", 0.2, 785))) is None
    assert doubted_decline(AIMessage("INSUFFICIENT: nothing")) is None
    no_ids = AIMessage("x", response_metadata={"logprobs": {"content": [{"top_logprobs": [
        {"token": "Ins", "logprob": math.log(0.3)}, {"token": "The", "logprob": math.log(0.6)}]}]}})
    assert doubted_decline(no_ids) is None


def test_the_prompts_evidence_markup_pasted_back_becomes_that_documents_text_cited_by_its_label():
    strips = [strip("ipcc", "This involves publishing default emission factors.", 0.9),
              strip("amazon", "The rainforest may be threatened by climate change.", 0.8)]
    prompt = generation_prompt("What is used to estimate emissions?", strips, Context())
    reply = ('The most relevant evidence is: <evidence id="doc_1" title="Ipcc">\nThis involves publishing default '
             "emission factors &amp; more.\n...\nLevels are used.\n</evidence>")  # fmt: skip
    draft = draft_from(reply, prompt)
    assert draft.answer == "This involves publishing default emission factors & more. Levels are used. [doc_1]"
    assert [c["doc_id"] for c in draft.citations] == ["ipcc"]
    cut = draft_from('Answer: <evidence id="doc_2" title="Amazon">\nThe rainforest may be threatened', prompt)
    assert cut.answer == "The rainforest may be threatened [doc_2]"  # a reply cut before the closing tag
    assert "evidence" not in generation_prompt("What is used?", strips, Context()).messages[0].content.split(
        "Focus:")[1]  # the local focus no longer invites "The most relevant evidence is:"


def test_the_answer_grades_schema_bounds_its_free_text_so_a_grammar_stops_a_rambling_field():
    properties = compact_schema(AnswerVerdict)["properties"]
    assert (properties["missing"]["maxLength"], properties["reason"]["maxLength"]) == (MISSING_CHARS, REASON_CHARS)
    assert AnswerVerdict.model_validate({"score": 1, "missing": "x" * 500}).missing == "x" * 500  # read, not refused


def test_sentences_that_repeat_the_prompts_instructions_are_not_an_answer():
    from selfcrag.llm.generator import _without_instructions

    strips = [strip("returns", "Most items can be returned within 30 days from the date of delivery.", 0.9)]
    prompt = generation_prompt("How many days do I have to return an item?", strips, Context())
    parroted = draft_from("The question asks for one specific point: state it, citing the document that gives it.",
                          prompt)  # fmt: skip
    assert parroted.answer  # a draft as the reply parses ...
    empty = _without_instructions(parroted, prompt)
    assert empty.answer == "" and empty.citations == [] and "instructions" in empty.missing  # ... but not an answer
    mixed = draft_from("Items can be returned within 30 days [doc_1]. The question asks for one specific point: "
                       "state it, citing the document that gives it.", prompt)  # fmt: skip
    kept = _without_instructions(mixed, prompt)
    assert kept.answer == "Items can be returned within 30 days [doc_1]." and [c["ref"] for c in kept.citations] == [
        "doc_1"]  # fmt: skip
    right = draft_from("Most items can be returned within 30 days [doc_1].", prompt)
    assert _without_instructions(right, prompt) is right  # an answer from the evidence is left alone


def test_the_generators_sureness_is_the_geometric_mean_of_its_token_probabilities():
    from selfcrag.llm.declines import token_probability

    tokens = [{"token": t, "logprob": math.log(p)} for t, p in (("30", 0.9), (" days", 0.4), (".", 1.0))]
    assert token_probability(AIMessage("30 days.", response_metadata={"logprobs": {"content": tokens}})) == round(
        (0.9 * 0.4 * 1.0) ** (1 / 3), 4)  # fmt: skip
    assert token_probability(AIMessage("30 days.")) is None  # a server that gave none: unmeasured, not 0
    assert token_probability(AIMessage("x", response_metadata={"logprobs": {"content": [{"logprob": None}]}})) is None


def test_a_reply_that_repeats_its_instructions_is_asked_once_more_without_the_focus_line():
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    from selfcrag.llm.generator import LLMGenerator
    from selfcrag.llm.models import ChatModels

    strips = [strip("returns", "Most items can be returned within 30 days from the date of delivery.", 0.9)]
    parrot = ("The question asks for one specific point: state it, citing the document that gives it. The document "
              "that gives this information is [doc_1].")  # fmt: skip
    seen: list[str] = []

    class Recording(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
            seen.append(str(messages[0].content))
            return super()._generate(messages, stop, run_manager, **kwargs)

    model = Recording(messages=iter([AIMessage(parrot), AIMessage("Items can be returned within 30 days [doc_1].")]))
    draft = LLMGenerator(ChatModels(llm=model)).generate("How many days do I have to return an item?", strips,
                                                         Context())  # fmt: skip
    assert draft.answer == "Items can be returned within 30 days [doc_1]." and draft.llm_calls == 2
    assert "Focus:" in seen[0] and "Focus:" not in seen[1] and "Task:" not in seen[1]
