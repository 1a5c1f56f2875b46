"""The model backend's answer grader keeps answers to the question's constraints, through the real `ChatOpenAI`
client against the local OpenAI-compatible server: the prompt asks about the same entity, year and qualifier, and
the offline constraint check runs on the model's answer as a rule, so a grader model that misses the swap (or
fails) does not let it through."""

from __future__ import annotations

from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer, Reply
from support.replies import Plausible

from selfcrag.context import Context
from selfcrag.llm.answer_grade import LLMAnswerGrader
from selfcrag.llm.models import ChatModels
from selfcrag.prompts import grading

QUESTION = "How much does the monthly plan cost per year?"
SWAPPED = "The annual plan costs $99 per year. [doc_1]"


def grader_for(server: OpenAIServer) -> LLMAnswerGrader:
    client = ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0, timeout=10)
    return LLMAnswerGrader(ChatModels(client))


def test_the_prompt_asks_about_the_constraints_and_the_rule_overrules_a_model_that_missed_the_swap():
    with OpenAIServer(Plausible(usefulness=1.0).responder()) as server:  # a grader model that calls it useful
        grader = grader_for(server)
        grade = grader.grade(QUESTION, SWAPPED, Context())
        kept = grader.grade(QUESTION, "The monthly plan costs $120 per year. [doc_1]", Context())
    system = server.asking("grade whether an answer")[0].system
    assert "same entity" in system and "same qualifier" in system and grading.ANSWER == "grade_answer/4"
    assert not grade.useful and grade.violations == 1 and grade.llm_calls == 1
    assert 'asks about "monthly plan"; the answer says "annual plan"' in grade.missing
    assert "rule: the question asks about 'monthly plan'" in grade.reason
    assert kept.useful and kept.violations == 0 and kept.score == 1.0
    assert kept.term_coverage is not None and kept.term_coverage > grade.term_coverage


def test_a_failed_grader_model_fails_open_except_on_what_the_rule_found():
    with OpenAIServer(lambda request: Reply.fail(500)) as server:
        grader = grader_for(server)
        grade = grader.grade(QUESTION, SWAPPED, Context())
        kept = grader.grade(QUESTION, "The monthly plan costs $120 per year. [doc_1]", Context())
    assert grade.error and not grade.useful and "annual plan" in grade.missing
    assert kept.error and kept.useful  # fails open


def test_a_verdict_whose_missing_reads_back_the_instructions_is_not_taken():
    # What a 0.5B model replied to a right answer: its instructions' description of a wrong one, and score 0.0.
    echo = {"score": 0.0, "reason": "different",
            "missing": "The question asks about a different one, the answer is about a different one."}
    said = {"score": 0.0, "reason": "no plan price", "missing": "the price of the monthly plan per year"}
    right = "The monthly plan costs $120 per year. [doc_1]"
    with OpenAIServer(lambda request: Reply.json(echo)) as server:
        grade = grader_for(server).grade(QUESTION, right, Context())
    assert grade.error == "verdict not taken: its 'missing' repeats the grader's instructions"
    assert grade.useful and grade.score == Context().thresholds().answer_relevance  # fails open, as on a fault
    assert "different one" not in grade.missing  # never fed to the query rewrite or shown in an abstention
    with OpenAIServer(lambda request: Reply.json(said)) as server:  # a verdict in its own words stands
        kept = grader_for(server).grade(QUESTION, right, Context())
    assert not kept.error and not kept.useful and kept.missing == "the price of the monthly plan per year"
