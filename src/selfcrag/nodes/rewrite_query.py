"""Rewrites the query: a short keyword query for web search (CRAG `incorrect`), or a better knowledge-base
query from the grader's feedback and the best evidence so far (a new retrieval round)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.components.backend import Components
from selfcrag.context import Context, settings_of
from selfcrag.nodes import model_notes, spent
from selfcrag.progress import emit
from selfcrag.routing import rewrite_for_web
from selfcrag.state import State


def make(components: Components):  # noqa: ANN201
    def rewrite_query(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        for_web = rewrite_for_web(state)
        query = state.get("query") or state["question"]
        rewrite = components.rewriter.rewrite(
            state["question"], query, state.get("knowledge") or [], state.get("feedback") or "", for_web, settings
        )
        emit("rewrite_query", f"rewrote the {'web' if for_web else 'retrieval'} query: {rewrite.query!r}",
             query=rewrite.query, for_web=for_web)
        update: dict[str, Any] = spent(rewrite)
        update["web_query" if for_web else "query"] = rewrite.query
        update["trace"] = [
            {
                "node": "rewrite_query",
                "decision": "web query" if for_web else "new retrieval query",
                "reason": rewrite.reason or "rewritten",
                "query": rewrite.query,
                **model_notes(rewrite),
            }
        ]
        return update

    return rewrite_query
