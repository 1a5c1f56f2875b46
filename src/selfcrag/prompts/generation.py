"""The generator's prompt, in layers: system (the rules: the `generate_prompt` setting), task (qa / summarize /
compare / code), focus (local: one point from the best evidence; global: an overview across documents), few-shot
examples of cited answers, the last chat turns, then the context: delimited evidence, the question, and the
statements an earlier draft could not support. Task and focus come from the question unless the settings fix them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from selfcrag.contract import Strip, Turn
from selfcrag.prompts.evidence import block, compress, doc_labels, evidence_blocks, fence_key
from selfcrag.prompts.system import PROMPTS, system_text, version

if TYPE_CHECKING:
    from selfcrag.context import Context

# Version 2: the local focus no longer says "answer it from the most relevant evidence", which a 0.5B model
# continued as "The most relevant evidence is: <evidence ...>" instead of answering. The system text is the
# `generate_prompt` setting (prompts/system.py); the task and focus lines follow it. The evidence is fenced with
# a random key per prompt (prompts/evidence.py), the examples too.
VERSION = PROMPTS["generate"].version

TASKS = {
    "qa": "Task: answer the question directly, in one to three sentences.",
    "summarize": "Task: summarise what the evidence says on the topic in a short paragraph or a few bullet points.",
    "compare": "Task: compare the things the question names point by point, similarities first; say which points "
    "the evidence covers for only one of them.",
    "code": "Task: give the code or command the evidence shows in a fenced code block, with one sentence on what it "
    "does; never invent functions, flags or parameters the evidence does not show.",
}

FOCUS = {
    "local": "Focus: the question asks for one specific point: state it, citing the document that gives it.",
    "global": "Focus: the question asks for an overview; draw on every document that bears on it and cite each.",
}

# Two short examples: a cited answer that says what it cannot answer, and a reply when nothing answers.
FEW_SHOT: list[tuple[list[tuple[str, str, str]], str, str]] = [
    (
        [("doc_1", "Delivery", "Express delivery takes 1-2 business days."),
         ("doc_2", "Fees", "Express delivery costs $9.99.")],
        "How fast is express delivery, what does it cost, and does it run on Sundays?",
        "Express delivery takes 1-2 business days [doc_1] and costs $9.99 [doc_2].\n"
        "Missing: whether express delivery runs on Sundays.",
    ),
    (
        [("doc_1", "Profile", "You can change your email address under Settings.")],
        "How do I delete my account?",
        "INSUFFICIENT: how to delete an account",
    ),
]


def example(evidence: list[tuple[str, str, str]], question: str, key: str) -> str:
    """A few-shot example's message, its evidence fenced as the real evidence is."""
    shown = "\n".join(block("evidence", label, text, title, key) for label, title, text in evidence)
    return f"{shown}\n\nQuestion: {question}"


_COMPARE = re.compile(r"\b(?:compare[sd]?|comparison|differen(?:ce|ces|t)|differ|versus|vs\.?|better|worse|"
                      r"pros and cons|similarit(?:y|ies))\b", re.I)  # fmt: skip
_SUMMARIZE = re.compile(r"\b(?:summar(?:y|ise|ize|ies)|overview|tl;?dr|recap|outline|key points|main points)\b", re.I)
_CODE = re.compile(r"```|\b(?:code|snippet|function|script|command|curl|regex|sql|python|javascript|bash|"
                   r"endpoint|api call)\b", re.I)  # fmt: skip
_GLOBAL = re.compile(r"\b(?:overall|in general|everything|all (?:the )?(?:\w+ )?\w+s\b|list (?:all|every)|"
                     r"what (?:kinds|types)|which (?:options|plans|types|ways)|"
                     r"main (?:\w+ )?(?:points|topics|themes|features))\b", re.I)  # fmt: skip


def task_of(question: str) -> str:
    """The task the question asks for; a comparison or summary wins over code (they may mention code)."""
    for task, cue in (("compare", _COMPARE), ("summarize", _SUMMARIZE), ("code", _CODE)):
        if cue.search(question):
            return task
    return "qa"


def mode_of(question: str, task: str) -> str:
    """`global` for overviews (summaries, comparisons, "all the ...", "in general"); `local` for one point."""
    return "global" if task in ("summarize", "compare") or _GLOBAL.search(question) else "local"


@dataclass
class GenerationPrompt:
    messages: list[BaseMessage]
    labels: dict[str, str]  # doc_id -> "doc_N" as shown in the evidence
    strips: list[Strip]  # the strips kept within the token budget, best first
    name: str  # version, task and focus, for the trace
    role: str = "answer"  # the completion cap it gets (llm/calls.py MAX_TOKENS): "short_answer" for one point


def generation_prompt(question: str, strips: list[Strip], settings: Context, avoid: list[str] | None = None,
                      history: list[Turn] | None = None, guided: bool = True) -> GenerationPrompt:  # fmt: skip
    """The prompt; `guided=False` leaves out the task and focus lines (the generator asks so once more when a
    reply only repeated them, llm/generator.py)."""
    task = task_of(question) if settings.task == "auto" else settings.task
    mode = mode_of(question, task) if settings.answer_mode == "auto" else settings.answer_mode
    kept = compress(strips, settings.context_tokens, mode)
    # Numbered over all the strips, as the groundedness checkers number them, so [doc_2] names the same document
    # in the answer and in the check; a document cut by the budget leaves its number unused.
    in_budget = {strip["doc_id"] for strip in kept}
    labels = {doc_id: label for doc_id, label in doc_labels(strips).items() if doc_id in in_budget}
    system = system_text(settings, "generate")
    lines = [system, TASKS[task], FOCUS[mode]] if guided else [system]
    messages: list[BaseMessage] = [SystemMessage("\n\n".join(lines))]
    # The same question and evidence make the same request: plain RAG's draft and the first draft agree.
    key = fence_key(question, *(strip["text"] for strip in kept), *(avoid or []))
    if settings.few_shot:
        for evidence, asked, answer in FEW_SHOT:
            messages += [HumanMessage(example(evidence, asked, key)), AIMessage(answer)]
    turns = (history or [])[-2 * settings.history_turns :] if settings.history_turns else []
    messages += [HumanMessage(t["content"]) if t["role"] == "user" else AIMessage(t["content"]) for t in turns]
    context = f"{evidence_blocks(kept, labels, key)}\n\nQuestion: {question.strip()}"
    if avoid:
        context += ("\n\nAn earlier answer made these statements, which the evidence does not support; do not "
                    "repeat them:\n" + "\n".join(f"- {statement}" for statement in avoid))  # fmt: skip
    messages.append(HumanMessage(context))
    role = "short_answer" if (task, mode) == ("qa", "local") else "answer"
    return GenerationPrompt(messages, labels, kept, f"{version(settings, 'generate')} ({task}, {mode})", role)
