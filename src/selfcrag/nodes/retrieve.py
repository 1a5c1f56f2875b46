"""Retrieves passages for the current query from the knowledge base (or the caller's retriever). Sentences that
address the assistant (prompt injection) are removed here, so every later step sees clean passages: those the
detector finds, and on the model backend those the model-judged screen finds (`llm/screen.py`).

Only chunks no earlier round of the run retrieved go on to grading: the ones judged relevant before are in the
run's evidence already, the ones rejected would be rejected again. A later round that finds no new chunk cannot
add evidence, and routing ends the correction there (`routing.nothing_new`)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.ledger import ledger_of
from selfcrag.nodes import model_notes, spent
from selfcrag.progress import emit
from selfcrag.quality import injection
from selfcrag.state import NodeFunction, State
from selfcrag.trust_boundary import settings_of

RANKS = ("vector_rank", "keyword_rank")  # each retriever's rank of a passage, kept in the trace for calibration


def make(components: Components) -> NodeFunction:
    def retrieve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        query = state.get("query") or state["question"]
        retrieved = components.retriever_for(settings).retrieve(query, settings)
        passages, removed = injection.clean_passages(retrieved)  # documents are data, never instructions
        screening = components.screen.screen(passages, settings)  # by meaning, on the model backend
        passages, also = injection.drop(passages, screening.removed)
        removed += also
        seen = list(state.get("seen") or [])
        new = [p for p in passages if p["id"] not in seen]
        ledger = ledger_of(state, runtime, settings)  # the run's round count, never the client-writable state's
        rounds = ledger.next_round(new_evidence=bool(new))
        fresh = f", {len(new)} new" if rounds > 1 else ""  # every passage of the first round is new
        emit("retrieve", f"retrieved {len(passages)} passages{fresh} (round {rounds}/{settings.max_retrieval_rounds})",
             passages=len(passages), new=len(new), round=rounds)
        reason = f"round {rounds}/{settings.max_retrieval_rounds}, query: {query!r}"
        if rounds > 1:
            reason += f"; {len(new)} not retrieved before" + ("" if new else ": no new evidence, correction ends")
        return {
            **spent(screening),
            "documents": new,
            "seen": seen + [p["id"] for p in new],
            "retrieval_rounds": rounds,
            "queries": [*(state.get("queries") or []), query],
            # New evidence: the generation budget starts again (a round with none ends the correction instead).
            "generations": ledger.generations,
            "trace": [
                {
                    "node": "retrieve",
                    "decision": f"{len(new)} new passages" if rounds > 1 else f"{len(passages)} passages",
                    "reason": reason + injection.reason(removed),
                    "new": len(new),
                    "passages": [{"id": p["id"], "score": round(p["score"], 3),
                                  **{k: p[k] for k in RANKS if k in p}} for p in retrieved],  # type: ignore[literal-required]
                    **injection.notes(removed),
                    **model_notes(screening),
                }
            ],
        }

    return retrieve
