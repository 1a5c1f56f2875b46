"""How a run ends in the chat history: the answer becomes an AI message.

That one message is what Studio's chat view shows, what a parent `MessagesState` graph receives when it adds
the compiled graph as a node, and what `stream_mode="messages"` yields for an offline run (the offline
generator copies sentences, so it has no tokens to stream).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from selfcrag.contract import Citation
from selfcrag.state import State

AGENT_NAME = "selfcrag"


def answer_message(answer: str, citations: list[Citation], decision: str) -> AIMessage:
    """The answer text (with its `[doc_N]` markers) plus the citations and decision, which chat models ignore
    in `additional_kwargs` but a parent agent or UI can read."""
    return AIMessage(
        content=answer,
        name=AGENT_NAME,
        additional_kwargs={"citations": list(citations), "decision": decision},
    )


def close_run(state: State, update: dict[str, Any]) -> dict[str, Any]:
    """The update of the node that ends a run (finalize, or human_review after a person decided): append the
    answer to the chat history, and clear `question` so the next run on the same thread — a chat turn that
    sends only `messages` — asks its own question instead of repeating this one."""
    answer = update.get("answer", state.get("answer") or "")
    citations = update.get("citations", state.get("citations") or [])
    return update | {"question": "", "messages": [answer_message(answer, citations, update["decision"])]}
