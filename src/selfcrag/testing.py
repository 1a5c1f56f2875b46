"""A fake chat model for testing an app built on selfcrag's model backend, in-process and deterministic.

    from selfcrag import build_graph
    from selfcrag.testing import FakeChatModel

    model = FakeChatModel()
    result = build_graph(llm=model).invoke({"question": "How many days do I have to return an item?"})
    assert result["decision"] == "answer" and model.calls.count("answer") == 1

A plain-text fake (LangChain's `FakeListChatModel`) fails every grader — they expect JSON — and the run abstains.
This one answers each selfcrag role in its shape, by rule from the prompt: which role is asked is read from the
reply schema the structured-output layer appends to the system prompt (this model has no tool calling or JSON
mode, so the layer falls back to that plain prompt), and a prompt without one is the generator's.

- relevance: `correct` when `relevant(question, passage)` (default: the passage covers over half of the question's
  content words), else `incorrect`; refinement keeps the relevant strips
- generation: the sentence of the first relevant evidence block that covers most of the question, cited
  `[doc_N]`; `INSUFFICIENT` when none is relevant; or `answer` (a fixed text, or a function of question and
  evidence) when given
- groundedness: every statement grounded, except those containing one of `unsupported`
- answer grade: `usefulness`; rewrites: the question's longer words; a follow-up: carried as offline; the route:
  `direct` for conversation as the offline router reads it, else `retrieve`
- `fail`: roles whose calls raise `FakeModelError` (a model fault: the step degrades, the run goes on)
- `declines`: how many answer calls reply `INSUFFICIENT` before it answers: with 1, plain's single-pass draft (the
  run's first candidate) finds nothing, and the run goes on to grade, refine and generate (the correction path)
- `calls`: the roles asked, in order
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Collection
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from selfcrag.contract import Turn
from selfcrag.errors import FakeModelError
from selfcrag.offline.contextualize import carry_subject
from selfcrag.offline.router import nothing_to_look_up
from selfcrag.text.terms import coverage, question_terms
from selfcrag.text.text import split_sentences

# The reply schema's title -> the role (the pydantic models of llm/).
ROLES = {"PassageGrades": "relevance", "PassageVerdict": "relevance", "StripChoice": "refine",
         "StatementCheck": "groundedness", "AnswerVerdict": "answer_grade", "SearchQuery": "rewrite",
         "StandaloneQuestion": "contextualize", "QuestionRoute": "route"}  # fmt: skip
_SCHEMA_TITLE = re.compile(r'matching this JSON schema: \{"title":\s*"(\w+)"')
# A fenced block of a prompt (prompts/evidence.py): the tag and its key open and close it.
_BLOCK = re.compile(r'<((?:passage|strip|evidence|answer)(?:-[0-9a-f]+)?) id="([^"]*)"[^>]*>\n(.*?)\n</\1>', re.S)
_QUESTION = re.compile(r"^(?:Last )?[Qq]uestion: (.*)$", re.M)
_USER_TURN = re.compile(r"^User: (.*)$", re.M)
_MESSAGE = re.compile(r"^Message: (.*)$", re.M)


def covers_question(question: str, text: str) -> bool:
    """The default relevance rule: the text covers more than half of the question's content words."""
    covered, _ = coverage(question_terms(question), text)
    return covered > 0.5


class FakeChatModel(BaseChatModel):
    """Answers each selfcrag role correctly shaped, by rule (see the module doc)."""

    relevant: Callable[[str, str], bool] = covers_question
    unsupported: Collection[str] = ()
    usefulness: float = 0.9
    answer: str | Callable[[str, list[tuple[str, str]]], str] | None = None
    fail: Collection[str] = ()
    declines: int = 0
    calls: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "selfcrag-fake"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        system = "\n".join(str(m.content) for m in messages if isinstance(m, SystemMessage))
        user = str(next((m.content for m in reversed(messages) if isinstance(m, HumanMessage)), ""))
        title = _SCHEMA_TITLE.search(system)
        role = ROLES.get(title.group(1), title.group(1)) if title else "answer"
        self.calls.append(role)
        if role in self.fail:
            raise FakeModelError(f"scripted fault of the {role} call")
        said = self._reply(role, user)
        if title and title.group(1) == "PassageVerdict":  # one passage per call (grading="parallel")
            said = said["grades"][0]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(said if isinstance(said, str) else
                                                                        json.dumps(said)))])  # fmt: skip

    def _reply(self, role: str, user: str) -> Any:
        found = _QUESTION.findall(user)
        question = found[-1].strip() if found else ""
        if role == "relevance":
            grades = [self._verdict(question, ident, text) for ident, text in _blocks(user, "passage")]
            return {"grades": grades}
        if role == "refine":
            return {"keep": [{"id": i, "score": 0.9} for i, text in _blocks(user, "strip")
                             if self.relevant(question, text)]}  # fmt: skip
        if role == "groundedness":
            answer = next((text for _, text in _blocks(user, "answer")), "")
            statements = [re.sub(r"\s*\[doc_\d+\]", "", s) for s in split_sentences(answer)]
            return {"statements": [{"text": s, "reason": "checked", "verdict": "unsupported" if any(
                u in s for u in self.unsupported) else "grounded"} for s in statements]}  # fmt: skip
        if role == "answer_grade":
            return {"score": self.usefulness, "missing": "", "reason": "graded by rule"}
        if role == "rewrite":
            return {"query": " ".join(w for w in re.findall(r"\w+", question) if len(w) > 3), "reason": "keywords"}
        if role == "route":  # the offline rule: conversation is answered directly, everything else retrieves
            message = (_MESSAGE.findall(user) or [""])[-1]
            return {"route": "direct" if nothing_to_look_up(message) else "retrieve", "reason": "by rule"}
        if role == "contextualize":
            history = [Turn(role="user", content=t.strip()) for t in _USER_TURN.findall(user)]
            return {"question": carry_subject(question, history).query}
        return self._answer(question, _blocks(user, "evidence"))

    def _verdict(self, question: str, ident: str, text: str) -> dict[str, Any]:
        label = "correct" if self.relevant(question, text) else "incorrect"
        return {"id": ident, "label": label, "confidence": 0.9, "reason": f"{label} by rule"}

    def _answer(self, question: str, evidence: list[tuple[str, str]]) -> str:
        if self.calls.count("answer") <= self.declines:
            return "INSUFFICIENT: scripted to decline (declines)"
        if isinstance(self.answer, str):
            return self.answer
        if self.answer is not None:
            return self.answer(question, evidence)
        for ident, text in evidence:
            if self.relevant(question, text):
                # Evidence shows a document's strips in reading order, so the best sentence need not come first.
                terms = question_terms(question)
                sentences = split_sentences(text.replace("\n...\n", "\n")) or [text]
                sentence = max(sentences, key=lambda s: coverage(terms, s)[0]).rstrip(".")  # first on a tie
                return f"{sentence} [{ident}]."
        return "INSUFFICIENT: the evidence does not cover the question"


def _blocks(text: str, tag: str) -> list[tuple[str, str]]:
    """(id, text) of every <tag id="..."> block of a prompt, unescaped."""
    return [(ident, html.unescape(body)) for kind, ident, body in _BLOCK.findall(text)
            if kind.split("-")[0] == tag]
