"""Rewrites the query: a short keyword query for web search (CRAG `incorrect`), or a better knowledge-base
query from the grader's feedback and the best evidence so far (a new retrieval round). A rewrite that can find
nothing new (a query already tried, or no term the queries so far lacked) is traced as `stop`: routing ends
the correction there."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.nodes import model_notes, spent
from selfcrag.progress import emit
from selfcrag.routing import adds_no_terms, repeats_a_query, rewrite_for_web
from selfcrag.state import NodeFunction, State
from selfcrag.trust_boundary import settings_of


def make(components: Components) -> NodeFunction:
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
        if rewrite.bridges:
            update["bridges"] = list(dict.fromkeys([*(state.get("bridges") or []), *rewrite.bridges]))
        reason, decision = rewrite.reason or "rewritten", "web query" if for_web else "new retrieval query"
        after = {**state, "query": rewrite.query}  # what routing reads next: say here why it stops
        if not for_web and repeats_a_query(after):  # type: ignore[arg-type]
            decision, reason = "stop", f"{reason}; the query was retrieved with already: nothing new to find"
        elif not for_web and adds_no_terms(after):  # type: ignore[arg-type]
            decision, reason = "stop", f"{reason}; no content term the queries so far lacked: nothing new to find"
        update["trace"] = [
            {
                "node": "rewrite_query",
                "decision": decision,
                "reason": reason,
                "query": rewrite.query,
                "bridges": rewrite.bridges,
                **model_notes(rewrite),
            }
        ]
        return update

    return rewrite_query
