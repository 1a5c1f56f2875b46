"""The local verifier (optional, off by default): one question to a chat model, usually a small one served on this
machine, about the draft the run would show: does the passage it cites answer the question with this answer?

Its score is P(yes) from the first token's probabilities when the server returns them (llama.cpp's server and
OpenAI do, with `logprobs`), else the parsed Yes or No. The reply is read only for that first word: whatever else
a model writes (or a passage made it write) decides nothing. A small model says Yes far too often (the 0.5B to 64
of 100 unanswerable SQuAD questions), so the score is never a decision by itself: it is a calibration feature
(`verifier` in quality/calibration.py), weighed with the others by a file fitted with the verifier on. A fault
(server down, timeout, a reply with no yes or no) leaves the score unmeasured and the run decides as without it.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from selfcrag.contract import Strip, Verification
from selfcrag.llm.calls import call
from selfcrag.llm.declines import first_token_options, with_probabilities
from selfcrag.llm.models import chat_model, with_max_tokens
from selfcrag.llm.structured import NOT_STREAMED, text_of, usage_tokens
from selfcrag.prompts import grading as prompts
from selfcrag.prompts.system import version
from selfcrag.text.terms import strip_citations

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage

    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels

REPLY_TOKENS = 2  # one word is asked for; its first token is all that is read
ANSWERS = {"yes": 1.0, "no": 0.0}


class ModelVerifier:
    """The verifier on the model the `verifier` setting names (at `verifier_url`), or on `llm` when one is given
    (tests, a caller's own model object)."""

    def __init__(self, llm: BaseChatModel | None = None) -> None:
        self.llm = llm
        self._built: dict[tuple[Any, ...], BaseChatModel] = {}
        self._lock = threading.Lock()

    def model(self, settings: Context) -> BaseChatModel:
        env = tuple(os.environ.get(n) for n in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_KEY",
                                                 "SELFCRAG_API_KEY"))  # fmt: skip
        key = (id(self.llm), settings.verifier, settings.verifier_url, settings.llm_timeout, env)
        with self._lock:
            if key not in self._built:
                base = self.llm or chat_model(settings.verifier, temperature=0.0, timeout=settings.llm_timeout,
                                              base_url=settings.verifier_url)  # fmt: skip
                self._built[key] = with_probabilities(with_max_tokens(base, REPLY_TOKENS))
            return self._built[key]

    def verify(self, question: str, answer: str, strips: list[Strip], settings: Context) -> Verification:
        text = strip_citations(answer)
        messages = prompts.verify(question, text, passages(text, strips), settings)
        outcome = call(self.model(settings), messages, settings, NOT_STREAMED)
        if outcome.error is not None:
            return Verification(score=None, llm_calls=outcome.calls, prompt=version(settings, "verify"),
                                error=outcome.reason)  # fmt: skip
        message = outcome.output
        reply = " ".join(text_of(message).split()[:3])[:40]
        score = yes_probability(message)
        error = "" if score is not None else f"no Yes or No in the verifier's reply ({reply!r})"
        return Verification(score=score, reply=reply, llm_calls=outcome.calls, prompt=version(settings, "verify"),
                            tokens=usage_tokens(message, messages), error=error)  # fmt: skip


def passages(answer: str, strips: list[Strip]) -> list[tuple[str, str]]:
    """(title, text) of the document that holds the draft's words best (its own, for an extractive draft), its
    strips in that order, then of the best-scored other document, if the run kept one."""
    documents: dict[str, list[Strip]] = {}
    for strip in strips:
        documents.setdefault(strip["doc_id"], []).append(strip)
    if not documents:
        return []

    def best(doc: list[Strip]) -> float:
        return max(float(s["score"]) for s in doc)

    own = max(documents.values(), key=lambda doc: (max(_overlap(answer, s["text"]) for s in doc), best(doc)))
    own = sorted(own, key=lambda s: (-_overlap(answer, s["text"]), -float(s["score"])))
    shown = [(own[0]["title"], "\n".join(s["text"] for s in own))]
    others = [doc for doc in documents.values() if doc[0]["doc_id"] != own[0]["doc_id"]]
    if others:
        runner_up: list[Strip] = max(others, key=best)
        other = sorted(runner_up, key=lambda s: -float(s["score"]))
        shown.append((other[0]["title"], "\n".join(s["text"] for s in other)))
    return shown


def _overlap(answer: str, text: str) -> float:
    """Share of the answer's words that the strip holds: the draft's own strip (an extractive one is a copy) is 1."""
    words = set(answer.lower().split())
    return len(words & set(text.lower().split())) / len(words) if words else 0.0


def _word(token: str) -> str:
    return token.strip().strip(".,:;!\"'").lower()


def yes_probability(message: Any) -> float | None:
    """P(yes) / (P(yes) + P(no)) over the first token's top alternatives when the server reported them and they
    hold either word; else 1 or 0 for a reply that starts with Yes or No; else None (unmeasured)."""
    shares = dict.fromkeys(ANSWERS, 0.0)
    for token, probability, _ in first_token_options(message):
        word = _word(token)
        if word in shares:
            shares[word] += probability
    if sum(shares.values()) > 0:
        return round(shares["yes"] / sum(shares.values()), 4)
    words = text_of(message).split()
    return ANSWERS.get(_word(words[0])) if words else None


def grader_yes_no(models: ChatModels, prompt: list[BaseMessage],
                  settings: Context) -> tuple[float | None, int, int, str]:
    """One word from the grader model, as the one-word graders ask it: (P(yes), or None when unmeasured; calls;
    tokens; why it is unmeasured)."""
    asking = with_probabilities(models.capped(models.grader(settings), REPLY_TOKENS))
    outcome = call(asking, prompt, settings, NOT_STREAMED)
    if outcome.error is not None:
        return None, outcome.calls, 0, outcome.reason
    p_yes = yes_probability(outcome.output)
    return (p_yes, outcome.calls, usage_tokens(outcome.output, prompt),
            "" if p_yes is not None else "no Yes or No in the reply")
