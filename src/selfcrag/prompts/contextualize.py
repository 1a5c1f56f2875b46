"""The prompt that turns a follow-up question into one that stands alone ("And how long does it take to arrive?"
after a question about express shipping -> "How long does express shipping take to arrive?"). The earlier
answers are delimited as data, like retrieved text: they quote documents."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from selfcrag.contract import Turn
from selfcrag.prompts.evidence import DATA_NOTICE, block, fence_key

CONTEXTUALIZE = "contextualize/2"  # 2: the answers fenced with a random key


def contextualize(question: str, history: list[Turn]) -> list[BaseMessage]:
    key = fence_key()
    system = f"""You rewrite the last question of a conversation so that it can be understood without the \
conversation: replace what it refers to ("it", "that", "and for ...", "what about ...") with the words the \
conversation used for it, and keep everything else it asks. Do not answer it. Write it in the language it was \
asked in. If it already stands alone, return it unchanged.
{DATA_NOTICE.format(tag="answer")}"""
    shown = []
    for i, turn in enumerate(history, 1):
        if turn["role"] == "user":
            shown.append(f"User: {turn['content'].strip()}")
        else:
            shown.append("Assistant:\n" + block("answer", f"a{i}", turn["content"], key=key))
    return [SystemMessage(system),
            HumanMessage("Conversation:\n" + "\n".join(shown) + f"\n\nLast question: {question.strip()}")]  # fmt: skip
