"""Retrieves passages for the current query from the knowledge base (or the caller's retriever). Sentences that
address the assistant (prompt injection) are removed here, so every later step sees clean passages."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.components.backend import Components
from selfcrag.context import Context, settings_of
from selfcrag.progress import emit
from selfcrag.quality import injection
from selfcrag.state import State


def make(components: Components):  # noqa: ANN201
    def retrieve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        query = state.get("query") or state["question"]
        retrieved = components.retriever_for(settings).retrieve(query, settings)
        passages, removed = injection.clean_passages(retrieved)  # documents are data, never instructions
        rounds = state.get("retrieval_rounds", 0) + 1
        emit("retrieve", f"retrieved {len(passages)} passages (round {rounds}/{settings.max_retrieval_rounds})",
             passages=len(passages), round=rounds)
        return {
            "documents": passages,
            "retrieval_rounds": rounds,
            "queries": [*(state.get("queries") or []), query],
            "generations": 0,  # new evidence: the generation budget starts again
            "trace": [
                {
                    "node": "retrieve",
                    "decision": f"{len(passages)} passages",
                    "reason": f"round {rounds}/{settings.max_retrieval_rounds}, query: {query!r}"
                    + injection.reason(removed),
                    "passages": [{"id": p["id"], "score": round(p["score"], 3)} for p in retrieved],
                    **injection.notes(removed),
                }
            ],
        }

    return retrieve
