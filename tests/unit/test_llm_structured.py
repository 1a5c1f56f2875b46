"""Structured output of the model backend: lenient parsing, clamped and normalised fields, method fallback,
fault classification and how a generator reply becomes a draft. No server: in-process chat models."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ValidationError

from selfcrag.context import Context
from selfcrag.contract import Strip
from selfcrag.llm.faults import describe, is_transient
from selfcrag.llm.generator import draft_from
from selfcrag.llm.models import ChatModels, chat_model
from selfcrag.llm.relevance import PassageGrades, PassageVerdict, relevance_score
from selfcrag.llm.structured import ask, compact_schema, loads_lenient
from selfcrag.prompts.generation import generation_prompt


class TextOnly(BaseChatModel):
    """A chat model with no tool calling and no JSON mode: replies with fixed texts, in turn."""

    replies: list[str]
    seen: list[Any] = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # noqa: ANN001, ANN202
        self.seen.append(messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.replies[len(self.seen) - 1]))])

    @property
    def _llm_type(self) -> str:
        return "text-only"


@pytest.mark.parametrize(
    "text",
    [
        '{"label": "correct", "confidence": 0.8}',
        'Sure! Here is my verdict:\n```json\n{"label": "correct", "confidence": 0.8}\n```\nHope it helps.',
        'Verdict: {"label": "correct", "confidence": 0.8,} (final)',
        "{'label': 'correct', 'confidence': 0.8}",
    ],
)
def test_lenient_parser_finds_the_object(text):
    assert loads_lenient(text) == {"label": "correct", "confidence": 0.8}


def test_lenient_parser_refuses_text_without_json():
    with pytest.raises(ValueError, match="no JSON"):
        loads_lenient("I am sorry, I cannot grade these passages.")


def test_scores_are_clamped_and_labels_normalised():
    assert PassageVerdict.model_validate({"label": " Relevant ", "confidence": 1.7}).model_dump() == {
        "id": "", "label": "correct", "confidence": 1.0, "reason": ""}
    assert PassageVerdict.model_validate({"label": "NOT RELEVANT", "confidence": "-0.2"}).confidence == 0.0
    assert PassageVerdict.model_validate({"label": "partially_relevant", "confidence": "80%"}).confidence == 0.8
    with pytest.raises(ValidationError):
        PassageVerdict.model_validate({"label": "maybe?", "confidence": 0.5})


def test_compact_schema_keeps_constraints_and_the_name():
    schema = compact_schema(PassageGrades)
    assert (schema["title"], schema["description"]) == ("PassageGrades", PassageGrades.__doc__)
    assert "$defs" not in schema  # nested models are inlined
    verdict = schema["properties"]["grades"]["items"]
    assert verdict["required"] == ["label"]
    assert verdict["properties"]["label"] == {"enum": ["correct", "ambiguous", "incorrect"], "type": "string"}
    assert verdict["properties"]["confidence"] == {"type": "number"}  # no title, no default


def test_a_model_without_structured_output_falls_back_to_the_plain_prompt_and_remembers_it():
    model = TextOnly(replies=['[{"id": "p1", "label": "incorrect"}]', '{"grades": [{"id": "p1", "label": "correct"}]}'])
    models = ChatModels(model)
    first = ask(models, model, PassageGrades, [HumanMessage("grade")], Context(), "relevance")
    assert first.value is not None and first.value.grades[0].label == "incorrect"  # a bare list is accepted
    assert (first.calls, first.error) == (1, "")
    assert first.tokens > 0  # no usage from this model: estimated with tiktoken
    assert models.method_for(model) == "prompt"
    assert "matching this JSON schema" in model.seen[0][0].content  # no API schema: the prompt carries it
    second = ask(models, model, PassageGrades, [HumanMessage("grade")], Context(), "relevance")
    assert second.value is not None and second.value.grades[0].label == "correct"
    assert len(model.seen) == 2


def test_a_reply_that_never_validates_is_a_fault_not_an_exception():
    model = TextOnly(replies=['{"grades": "all fine"}'])
    reply = ask(ChatModels(model), model, PassageGrades, [HumanMessage("grade")], Context(), "relevance")
    assert reply.value is None and reply.calls == 1
    assert reply.error.startswith("malformed reply")


def test_relevance_scores_fall_in_the_band_of_their_label():
    settings = Context(upper_threshold=0.6, lower_threshold=0.3)
    assert relevance_score("correct", 0.0, settings) == pytest.approx(0.6)
    assert relevance_score("correct", 1.0, settings) == pytest.approx(1.0)
    assert relevance_score("incorrect", 1.0, settings) == pytest.approx(0.0)
    assert 0.3 <= relevance_score("ambiguous", 0.9, settings) < 0.6


def test_transient_faults_are_told_apart():
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    assert is_transient(openai.APIConnectionError(request=request))
    assert is_transient(openai.APITimeoutError(request=request))
    for status, transient in ((503, True), (429, True), (400, False), (401, False)):
        error = openai.APIStatusError("x", response=httpx.Response(status, request=request), body=None)
        assert is_transient(error) is transient
    assert not is_transient(ValueError("bad"))
    assert describe(ValueError("bad\n  input")) == "ValueError: bad input"


def test_a_model_needs_a_key_or_a_server(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        chat_model("openai:gpt-4o-mini", temperature=0, timeout=5)
    with pytest.raises(ValueError, match="names no model"):
        chat_model("openai:", temperature=0, timeout=5)
    local = chat_model("openai:llama3", temperature=0, timeout=5, base_url="http://127.0.0.1:9/v1")
    assert local.model_name == "llama3"  # a local server needs no key


STRIPS = [
    Strip(id="r#0", doc_id="returns", title="Returns", source="r.md", score=0.9,
          text="Most items can be returned within 30 days of delivery. Electronics have 15 days."),
    Strip(id="s#0", doc_id="shipping", title="Shipping", source="s.md", score=0.7,
          text="Standard shipping takes 3-5 business days."),
]


def test_a_reply_becomes_a_draft_with_citations_quotes_and_what_is_missing():
    prompt = generation_prompt("How long do I have to return headphones?", STRIPS, Context())
    draft = draft_from("Electronics can be returned within 15 days [doc_1] [doc_9].\nMissing: whether headphones "
                       "count as electronics.", prompt)  # fmt: skip
    assert draft.answer == "Electronics can be returned within 15 days [doc_1]."  # the unknown label is gone
    assert draft.missing == "whether headphones count as electronics"
    assert [c["doc_id"] for c in draft.citations] == ["returns"]
    assert draft.citations[0]["quote"] == "Electronics have 15 days."


def test_an_insufficient_reply_is_no_draft():
    prompt = generation_prompt("Do you ship to Antarctica?", STRIPS, Context())
    draft = draft_from("INSUFFICIENT: the evidence does not mention Antarctica", prompt)
    assert (draft.answer, draft.citations) == ("", [])
    assert draft.missing == "the evidence does not mention Antarctica"
