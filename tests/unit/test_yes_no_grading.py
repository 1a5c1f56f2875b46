"""The model CRAG evaluator's `grading="yes_no"` mode (llm/relevance.py) with an in-process chat model: one
one-word call per passage, P(yes) from the first token's probabilities as the score, the label from the offline
thresholds, and a passage without a usable reply kept as ambiguous (fails open)."""

from __future__ import annotations

import math
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from selfcrag.context import Context
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

