"""The one-word graders (`grading="yes_no"`, `answer_grading="yes_no"`, `groundedness_checking="yes_no"`)
through the real `ChatOpenAI` client and a local OpenAI-compatible server that reports the first token's top
alternatives: each request asks for logprobs and two tokens, the score is P(yes) / (P(yes) + P(no)) from those
alternatives, a server that sends none is read from the reply's word, and a grader's reply with neither word fails
open (the hallucination check's fails closed: tests/unit/test_yes_no_grading.py)."""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer, Reply, Request

from selfcrag.context import Context
from selfcrag.contract import Strip
from selfcrag.llm.answer_grade import LLMAnswerGrader
from selfcrag.llm.groundedness import LLMGroundednessChecker
from selfcrag.llm.models import ChatModels
from selfcrag.llm.relevance import LLMRelevanceGrader
from selfcrag.prompts import grading

QUESTION = "How many days do I have to return an item?"
PASSAGES = [{"id": "returns", "title": "Returns", "text": "Items can be returned within 30 days.", "score": 0.8},
            {"id": "shipping", "title": "Shipping", "text": "Standard shipping takes 5 days.", "score": 0.6},
            {"id": "poems", "title": "Poems", "text": "Roses are red.", "score": 0.2}]  # fmt: skip


def replies(request: Request) -> Reply:
    """Yes with P 0.8 (and No 0.1, "yes" 0.05 lower-case) for returns; No for shipping; prose about poems; and for
    an answer, Yes without any alternatives (a server that does not report them); for an answer against its
    evidence, No at 0.6."""
    if "Roses" in request.user:
        return Reply.content("The passage is a poem.")
    if "<evidence" in request.user:
        return Reply(text="No", first_token=[("No", 0.6), ("Yes", 0.4)])
    if "<answer" in request.user:
        return Reply.content("Yes")
    if "returned within 30 days" in request.user:
        return Reply(text="Yes", first_token=[("Yes", 0.8), ("No", 0.1), (" yes", 0.05)])
    return Reply(text="No", first_token=[("No", 0.7), ("Yes", 0.3)])


@pytest.fixture
def models():
    with OpenAIServer(replies) as server:
        client = ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0, timeout=10)
        yield server, ChatModels(client)


def test_passages_are_scored_from_the_first_tokens_alternatives(models):
    server, chat = models
    settings = Context(backend="model", grading="yes_no")
    grades = LLMRelevanceGrader(chat).grade(QUESTION, PASSAGES, settings).grades
    returns, shipping, poems = ((g["label"], g["score"]) for g in grades)
    assert returns == ("correct", round(0.85 / 0.95, 4))  # "Yes" and " yes" are one word
    assert shipping == ("incorrect", 0.3)
    assert poems[0] == "ambiguous" and "no Yes or No" in grades[2]["reason"]  # fails open
    sent = server.asking("retrieval evaluator")
    assert len(sent) == 3 and all(r.body["logprobs"] and r.body["top_logprobs"] >= 2 for r in sent)
    assert {r.body.get("max_tokens") or r.body.get("max_completion_tokens") for r in sent} == {2}


def test_an_answer_is_graded_from_the_reply_word_when_the_server_sends_no_alternatives(models):
    server, chat = models
    settings = Context(backend="model", answer_grading="yes_no")
    grade = LLMAnswerGrader(chat).grade(QUESTION, "You have 30 days [doc_1].", settings)
    assert grade.useful and grade.score == 1.0 and grade.prompt == grading.ANSWER_YES_NO and not grade.error
    (request,) = server.asking("grade whether an answer")
    assert request.body["logprobs"] and "Yes or No?" in request.user


def test_an_answer_is_checked_against_its_evidence_from_the_first_tokens_alternatives(models):
    server, chat = models
    settings = Context(backend="model", groundedness_checking="yes_no")
    strips = [Strip(id="returns#0", doc_id="returns", title="Returns", source="returns.md", score=0.8,
                    text="Items can be returned within 30 days.")]  # fmt: skip
    check = LLMGroundednessChecker(chat).check("You have a month to send it back [doc_1].", strips, settings)
    assert check.score == 0.4 and not check.grounded and check.prompt == grading.GROUNDEDNESS_YES_NO
    (request,) = server.asking("check an answer against its evidence")
    assert request.body["logprobs"] and "returned within 30 days" in request.user and "Yes or No?" in request.user
