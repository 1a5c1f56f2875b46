"""The prompt that turns a follow-up question into one that stands alone ("And how long does it take to arrive?"
after a question about express shipping -> "How long does express shipping take to arrive?"). The earlier
answers are delimited as data, like retrieved text: they quote documents."""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from selfcrag.contract import Turn
from selfcrag.prompts.evidence import block, fence_key
from selfcrag.prompts.system import PROMPTS, system_text

if TYPE_CHECKING:
    from selfcrag.context import Context

CONTEXTUALIZE = PROMPTS["contextualize"].version


def contextualize(question: str, history: list[Turn], settings: Context) -> list[BaseMessage]:
    key = fence_key(question, *(turn["content"] for turn in history))
    system = system_text(settings, "contextualize")
    shown = []
    for i, turn in enumerate(history, 1):
        if turn["role"] == "user":
            shown.append(f"User: {turn['content'].strip()}")
        else:
            shown.append("Assistant:\n" + block("answer", f"a{i}", turn["content"], key=key))
    return [SystemMessage(system),
            HumanMessage("Conversation:\n" + "\n".join(shown) + f"\n\nLast question: {question.strip()}")]  # fmt: skip
