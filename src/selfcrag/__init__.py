"""selfcrag: a LangGraph state machine for self-corrective RAG (Corrective RAG + Self-RAG).

    from selfcrag import graph, ask
    ask("How many days do I have to return an item?")["answer"]

Importing is cheap: the embedding model and the index load on the first run.
"""

from __future__ import annotations

from typing import Any

from selfcrag.components.backend import Components, model_components, offline_components
from selfcrag.context import Context
from selfcrag.graph import build_graph, graph

__all__ = ["Components", "Context", "ask", "build_graph", "graph", "model_components", "offline_components"]


def ask(question: str, context: Context | dict[str, Any] | None = None, compiled_graph: Any = None) -> dict[str, Any]:
    """Run the graph once and return its output (answer, citations, decision, confidence, scores, trace).
    `compiled_graph` defaults to `graph` (models when OPENAI_API_KEY or OPENAI_BASE_URL is set, else offline);
    pass one from `build_graph(...)` to use other components or models."""
    return dict((compiled_graph or graph).invoke({"question": question}, context=context))
