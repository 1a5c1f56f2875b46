"""Routes the question before retrieval (Adaptive RAG's `route_question`): conversation — a greeting, thanks, a
question about the assistant — gets a short direct reply with no retrieval and no citations; a question the
knowledge base cannot cover goes to web search first when it is configured; the rest retrieve.

The router (offline/router.py offline, llm/router.py on a model) decides; any doubt or fault is
`retrieve`, so a knowledge question is never lost. A direct route writes its reply here (it names what the
knowledge base covers) and `finalize` closes the run with decision `direct`."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.errors import IngestError
from selfcrag.nodes import model_notes, spent
from selfcrag.offline.router import direct_reply
from selfcrag.progress import emit
from selfcrag.state import NodeFunction, State
from selfcrag.trust_boundary import settings_of


def make(components: Components) -> NodeFunction:
    def route_question(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        question = state["question"]
        try:
            index: Any = components.retriever_for(settings)
        except IngestError:  # no index to read coverage from: `retrieve` reports it in its own words
            index = None
        web = bool(state.get("web_available"))
        result = components.router.route(question, index, web, settings)
        update: dict[str, Any] = {"route": result.route, **spent(result)}
        if result.route == "direct":
            update |= {"answer": direct_reply(question, index), "citations": []}
        emit("route_question", f"route: {result.route}", route=result.route)
        update["trace"] = [{"node": "route_question", "decision": result.route, "reason": result.reason,
                            **model_notes(result)}]  # fmt: skip
        return update

    return route_question
