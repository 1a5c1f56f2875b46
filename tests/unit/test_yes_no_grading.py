"""The model CRAG evaluator's `grading="yes_no"` mode (llm/relevance.py) with an in-process chat model: one
one-word call per passage, P(yes) from the first token's probabilities as the score, the label from the offline
thresholds, and a passage without a usable reply kept as ambiguous (fails open). And the answer grader's
`answer_grading="yes_no"` mode (llm/answer_grade.py): one one-word call, P(yes) as answer relevance, useful at the
minimum answer relevance, the rule checks still overruling it, failing open as the JSON grader does. And the
hallucination check's `groundedness_checking="yes_no"` mode (llm/groundedness.py): P(yes) as the supported share,
the rule checks and copied sentences applied as in the JSON mode, failing closed."""

from __future__ import annotations

import math
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from selfcrag.context import Context
from selfcrag.contract import Strip
from selfcrag.llm.answer_grade import LLMAnswerGrader
from selfcrag.llm.groundedness import LLMGroundednessChecker
from selfcrag.llm.models import ChatModels
from selfcrag.llm.relevance import LLMRelevanceGrader
from selfcrag.prompts import grading

QUESTION = "How long does a refund take?"
P_YES = {"refunds": 0.9, "returns": 0.45, "shipping": 0.05}  # by the passage's topic


class Judging(BaseChatModel):
    """Says Yes or No with P(yes) by the passage's topic; a passage about poems gets prose without either word and
    no probabilities; one about outages raises."""

    logprobs: bool | None = None
    top_logprobs: int | None = None
    max_tokens: int | None = None
    seen: list[tuple[str, int | None, bool | None]] = []

    @property
    def _llm_type(self) -> str:
        return "judging"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        text = str(messages[-1].content)
        self.seen.append((str(messages[0].content), self.max_tokens, self.logprobs))
        if "outages" in text:
            raise ValueError("the grader's server is down")
        if "poems" in text:
            return ChatResult(generations=[ChatGeneration(message=AIMessage("The passage"))])
        p = next(p for topic, p in P_YES.items() if topic in text)
        options = [{"token": "Yes", "logprob": math.log(p)}, {"token": "No", "logprob": math.log(1 - p)}]
        word = "Yes" if p >= 0.5 else "No"
        metadata = {"logprobs": {"content": [{"token": word, "top_logprobs": options}]}}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(word, response_metadata=metadata))])


def passage(n: int, topic: str) -> dict[str, Any]:
    return {"id": f"d{n}", "title": topic, "text": f"A passage about {topic}.", "score": 0.5}


def test_each_passage_is_scored_by_p_yes_and_labelled_by_the_offline_thresholds() -> None:
    model = Judging(seen=[])
    settings = Context(backend="model", grading="yes_no")
    topics = ["refunds", "returns", "shipping", "poems", "outages"]
    grading_ = LLMRelevanceGrader(ChatModels(llm=model)).grade(QUESTION, [passage(n, t) for n, t in
                                                                         enumerate(topics, 1)], settings)  # fmt: skip
    labels = [(g["label"], g["score"]) for g in grading_.grades]
    assert labels[:3] == [("correct", 0.9), ("ambiguous", 0.45), ("incorrect", 0.05)]
    mid = round((settings.upper_threshold + settings.lower_threshold) / 2, 4)
    assert labels[3:] == [("ambiguous", mid), ("ambiguous", mid)]  # no Yes or No, and a fault: kept (fails open)
    assert grading_.grades[3]["reason"].startswith("grader failed: no Yes or No in the reply")
    assert "the grader's server is down" in grading_.grades[4]["reason"]
    assert grading_.prompt == grading.RELEVANCE_YES_NO and grading_.error
    assert grading_.llm_calls == 5  # one per passage; the fault is not transient, so not retried
    # One word asked for, with the first token's alternatives, and the same system prompt every time (cached).
    assert {(tokens, probabilities) for _, tokens, probabilities in model.seen} == {(2, True)}
    (system,) = {system for system, _, _ in model.seen}
    assert "data" in system.lower()  # passages are fenced as data (prompts/evidence.py)


def test_the_answer_grade_is_p_yes_useful_at_the_minimum_answer_relevance_and_overruled_by_the_rules() -> None:
    model = Judging(seen=[])
    settings = Context(backend="model", answer_grading="yes_no")
    grader = LLMAnswerGrader(ChatModels(llm=model))
    minimum = settings.thresholds().answer_relevance
    right = grader.grade(QUESTION, "All refunds take 5 days [doc_1].", settings)
    vague = grader.grade(QUESTION, "It depends on returns [doc_1].", settings)
    assert 0.45 < minimum <= 0.9  # so one answer clears it and one does not
    assert (right.score, right.useful, right.missing) == (0.9, True, "")
    assert right.prompt == grading.ANSWER_YES_NO and right.llm_calls == 1 and right.reason == "P(yes) 0.90"
    assert (vague.score, vague.useful) == (0.45, False)
    # An answer about another plan than the one asked: the rule's finding halves the score and says what is missing,
    # whatever the model said.
    swapped = grader.grade("How much does the monthly plan cost per year?",
                           "The annual plan costs $99 per year, refunds included [doc_1].", settings)  # fmt: skip
    assert not swapped.useful and swapped.score == 0.45 and swapped.violations == 1 and "annual plan" in swapped.missing
    assert {(tokens, probabilities) for _, tokens, probabilities in model.seen} == {(2, True)}
    (system,) = {system for system, _, _ in model.seen}
    assert "not whether it is true" in system and "data" in system.lower()


def test_an_answer_grade_without_yes_or_no_or_with_a_fault_fails_open() -> None:
    settings = Context(backend="model", answer_grading="yes_no")
    grader = LLMAnswerGrader(ChatModels(llm=Judging(seen=[])))
    for answer, why in (("Some poems take a day [doc_1].", "no Yes or No in the reply"),
                        ("Some outages last a day [doc_1].", "the grader's server is down")):  # fmt: skip
        grade = grader.grade(QUESTION, answer, settings)
        assert grade.useful and grade.score == settings.thresholds().answer_relevance and why in grade.error
        assert "fails open" in grade.reason


def evidence(text: str) -> list[Strip]:
    return [Strip(id="r#0", doc_id="r", title="Policy", source="r.md", text=text, score=0.9)]


REFUNDS = evidence("All refunds take 5 days to reach the card. Shipping fees are not refunded.")


def test_the_hallucination_check_is_p_yes_grounded_at_the_minimum_and_overruled_by_the_rules() -> None:
    model = Judging(seen=[])
    settings = Context(backend="model", groundedness_checking="yes_no")
    checker = LLMGroundednessChecker(ChatModels(llm=model))
    minimum = settings.thresholds().groundedness
    # The judging model reads the topic off the whole prompt; the evidence here is about refunds (P(yes) 0.9).
    stated = checker.check("A refund reaches the card within the week [doc_1].", REFUNDS, settings)
    assert 0.45 < minimum <= 0.9
    assert (stated.score, stated.grounded, stated.unsupported) == (0.9, True, [])
    assert stated.prompt == grading.GROUNDEDNESS_YES_NO and stated.llm_calls == 1 and not stated.error
    doubtful = checker.check("A refund reaches the card within the week [doc_1].",
                             evidence("All returns are accepted for a month."), settings)  # P(yes) 0.45
    assert (doubtful.score, doubtful.grounded) == (0.45, False)
    # A number the evidence does not have: the rule names the sentence and caps the share, whatever P(yes) was.
    invented = checker.check("All refunds take 9 days [doc_1]. Shipping fees are not refunded [doc_1].", REFUNDS,
                             settings)  # fmt: skip
    # Counted as a finding of the draft's score, not a veto: only certain findings veto (a citation to nothing).
    assert not invented.grounded and invented.unsupported == ["All refunds take 9 days."] and not invented.vetoed
    assert invented.findings == 1
    assert invented.score < 0.5
    assert {(tokens, probabilities) for _, tokens, probabilities in model.seen} == {(2, True)}
    (system,) = {system for system, _, _ in model.seen}
    assert "Yes or No" in system and "data" in system.lower()


def test_a_hallucination_check_without_yes_or_no_fails_closed_unless_every_sentence_is_copied() -> None:
    settings = Context(backend="model", groundedness_checking="yes_no")
    checker = LLMGroundednessChecker(ChatModels(llm=Judging(seen=[])))
    for text, why in (("Some poems rhyme.", "no Yes or No in the reply"),
                      ("Some outages last a day.", "the grader's server is down")):  # fmt: skip
        unread = checker.check("Refunds take a day [doc_1].", evidence(text), settings)
        assert not unread.grounded and unread.score == 0.0 and why in unread.error
        assert any("fails closed" in flag for flag in unread.flags)
        copied = checker.check(f"{text} [doc_1]", evidence(text), settings)
        assert copied.grounded and copied.score == 1.0  # read in the evidence without a model
