"""A plausible model for tests and benchmarks: answers each of selfcrag's prompts as a careful model would, from
the prompt text alone and deterministically. Tests override single answers; the rest stay plausible.

    model = Plausible(unsupported={"45 days"})
    OpenAIServer(model.responder())          # through the real ChatOpenAI client
    model("system prompt", "user prompt")    # directly, e.g. from an in-process chat model
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

from selfcrag.text.terms import coverage, question_terms
from selfcrag.text.text import split_sentences
from support.openai_server import Reply, Request

# A fenced block of a prompt (prompts/evidence.py): the tag and its key open and close it.
_BLOCK = re.compile(r'<((?:passage|strip|evidence|answer)(?:-[0-9a-f]+)?) id="([^"]*)"[^>]*>\n(.*?)\n</\1>', re.S)
_QUESTION = re.compile(r"^Question: (.*)$", re.M)
_MESSAGE = re.compile(r"^Message: (.*)$", re.M)
GREETINGS = {"hello", "hi", "thank", "好", "谢谢"}  # what this careful model knows as greetings (question_terms keys)


def blocks(text: str, tag: str) -> list[tuple[str, str]]:
    """(id, text) of every <tag id="..."> block in a prompt, unescaped."""
    return [(ident, html.unescape(body)) for kind, ident, body in _BLOCK.findall(text)
            if kind.split("-")[0] == tag]


def question_in(text: str) -> str:
    found = _QUESTION.findall(text)
    return found[-1].strip() if found else ""


def on_topic(question: str, text: str) -> bool:
    """Relevant when the passage covers more than half of the question's content words."""
    covered, _ = coverage(question_terms(question), text)
    return covered > 0.5


class Plausible:
    """Which prompt is which is read from its system prompt; what to answer, from its evidence and question."""

    def __init__(self, relevant: Callable[[str, str], bool] = on_topic, unsupported: set[str] | None = None,
                 answer: Callable[[str, list[tuple[str, str]]], str] | None = None, usefulness: float = 0.9,
                 planted: Callable[[str], bool] = lambda text: False) -> None:
        self.relevant = relevant
        self.planted = planted  # the injection screen's verdict on a text (llm/screen.py): True is "Yes"
        self.unsupported = unsupported or set()  # statements containing one of these are judged unsupported
        self.answer = answer or best_sentence_answer
        self.usefulness = usefulness

    def __call__(self, system: str, user: str) -> Any:
        """A dict (JSON) for a grader prompt, a string for the generator."""
        question = question_in(user)
        if "You route a user's message" in system:
            message = (_MESSAGE.findall(user) or [""])[-1]
            chatting = set(question_terms(message)) <= GREETINGS  # nothing but greetings, or no content word at all
            return {"route": "direct" if chatting else "retrieve", "reason": "greeting" if chatting else "a question"}
        if "You screen text" in system:
            return "Yes" if self.planted(blocks(user, "passage")[0][1]) else "No"
        if "Grade every passage" in system:
            return {"grades": [self._verdict(question, ident, text) for ident, text in blocks(user, "passage")]}
        if "Grade the passage" in system:
            ident, text = blocks(user, "passage")[0]
            return self._verdict(question, ident, text)
        if "select evidence" in system:
            strips = blocks(user, "strip")
            return {"keep": [{"id": i, "score": 0.9} for i, text in strips if self.relevant(question, text)]}
        if "statement by statement" in system:
            answer = blocks(user, "answer")[0][1]
            statements = [re.sub(r"\s*\[doc_\d+\]", "", s) for s in split_sentences(answer)]
            return {"statements": [{"text": s, "verdict": self._verdict_on(s), "reason": "checked"}
                                   for s in statements]}  # fmt: skip
        if "grade whether an answer" in system:
            return {"score": self.usefulness, "missing": "", "reason": "answers the question"}
        if "web search query" in system:
            return {"query": " ".join(w for w in re.findall(r"\w+", question) if len(w) > 3)[:60], "reason": "keywords"}
        if "search queries for a knowledge base" in system:
            return {"query": f"{question} details", "reason": "adds the missing detail"}
        return self.answer(question, blocks(user, "evidence"))

    def _verdict(self, question: str, ident: str, text: str) -> dict[str, Any]:
        label = "correct" if self.relevant(question, text) else "incorrect"
        return {"id": ident, "label": label, "confidence": 0.9, "reason": "on topic" if label == "correct" else "off"}

    def _verdict_on(self, statement: str) -> str:
        return "unsupported" if any(u in statement for u in self.unsupported) else "grounded"

    def responder(self) -> Callable[[Request], Reply]:
        """For OpenAIServer: JSON replies as JSON, answers as text."""

        def respond(request: Request) -> Reply:
            said = self(request.system, request.user)
            return Reply.content(said) if isinstance(said, str) else Reply.json(said)

        return respond


def best_sentence_answer(question: str, evidence: list[tuple[str, str]]) -> str:
    """The sentence of the first document that covers the question best (the first on a tie), cited: what a
    careful model says when the evidence answers. A document's strips come in reading order, so the best one need
    not come first."""
    if not evidence:
        return "INSUFFICIENT: no evidence"
    ident, text = evidence[0]
    terms = question_terms(question)
    sentences = split_sentences(text.replace("\n...\n", "\n")) or [text]
    sentence = max(sentences, key=lambda s: coverage(terms, s)[0]).rstrip(".")
    return f"{sentence} [{ident}]."


def reworded_answer(question: str, evidence: list[tuple[str, str]]) -> str:
    """The best sentence answer, not copied word for word: a sentence copied from the evidence it cites is
    grounded without the checker (llm/groundedness.py), so tests of how the checker's faults and verdicts degrade a
    run give it an answer only the checker can judge."""
    answer = best_sentence_answer(question, evidence)
    return answer if answer.startswith("INSUFFICIENT") else f"Reportedly, {answer[:1].lower()}{answer[1:]}"


def never_satisfied() -> Callable[[Request], Reply]:
    """A model whose answers are never supported nor useful, with a new rewrite every time: only the graph's
    bounds end a run (tests of those bounds)."""
    plausible = Plausible(unsupported={"30 days", "15 days", "business days"}, usefulness=0.1,
                          answer=reworded_answer).responder()
    rewrites = iter(range(10**6))

    def respond(request: Request) -> Reply:
        if "search queries for a knowledge base" in request.system:
            return Reply.json({"query": f"return window variant{next(rewrites)}", "reason": "another angle"})
        return plausible(request)

    return respond
