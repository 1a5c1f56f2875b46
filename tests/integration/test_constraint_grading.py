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
    system = server.asking("whether an answer addresses its question")[0].system
    assert "another person, place, thing, year or number" in system and grading.ANSWER == "grade_answer/4"
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


def test_what_is_missing_is_not_passed_on_when_it_reads_back_the_instructions_but_the_verdict_stands():
    # What a 0.5B model wrote into `missing`: its instructions' own words, not a reading of this answer.
    echo = "No: what the question asks that the answer does not give, in a few words"
    right = "The monthly plan costs $120 per year. [doc_1]"
    with OpenAIServer(lambda request: Reply.content(echo)) as server:
        grade = grader_for(server).grade(QUESTION, right, Context())
    assert not grade.error and not grade.useful and grade.score == 0.0  # the verdict word was read before the echo
    assert grade.missing == "" and "repeats the grader's instructions" in grade.reason  # never fed to the rewrite
    with OpenAIServer(lambda request: Reply.content("Partly: the price per year")) as server:
        kept = grader_for(server).grade(QUESTION, right, Context())
    assert not kept.error and not kept.useful and kept.score == 0.5 and kept.missing == "the price per year"


def test_a_reply_without_a_verdict_word_is_a_parse_failure_and_fails_open():
    with OpenAIServer(lambda request: Reply.content("The answer gives the monthly price.")) as server:
        grade = grader_for(server).grade(QUESTION, "The monthly plan costs $120 per year. [doc_1]", Context())
    assert grade.error.startswith("no verdict") and grade.useful and grade.llm_calls == 1
