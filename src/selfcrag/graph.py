"""The self-corrective RAG state machine (Corrective RAG + Self-RAG), and only that.

    prepare -> retrieve -> grade_documents --correct/ambiguous--> refine --ambiguous--> web_search -> generate
                                           --incorrect---------> rewrite_query --web--> web_search -> generate
                                                                               --kb---> retrieve (repeat: finalize)
    generate -> check_hallucination --not grounded, generations left--> generate
                                    --otherwise--> grade_answer --not useful, rounds left--> rewrite_query
                                                                --otherwise--> finalize
    finalize --low confidence, human review on--> human_review (interrupt) -> END;  otherwise -> END

Every loop is bounded by the graph's own counters in `routing.py`, never by the recursion limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from selfcrag import routing
from selfcrag.components.backend import Components, offline_components
from selfcrag.context import Context, settings_of
from selfcrag.nodes import (
    check_hallucination,
    finalize,
    generate,
    grade_answer,
    grade_documents,
    human_review,
    prepare,
    refine,
    retrieve,
    rewrite_query,
    web_search,
)
from selfcrag.state import InputState, OutputState, State

NODES = (prepare, retrieve, grade_documents, refine, web_search, generate, check_hallucination,
         grade_answer, rewrite_query, finalize, human_review)  # fmt: skip


def _route(decide: Callable[[State, Context], str]) -> Callable[[State, Runtime[Context]], str]:
    """Conditional edges call the pure routing functions with the run's settings."""

    def route(state: State, runtime: Runtime[Context]) -> str:
        return decide(state, settings_of(runtime.context))

    route.__name__ = decide.__name__
    return route


def build_graph(components: Components | None = None, **compile_kwargs: Any):  # noqa: ANN201
    """Compile the graph. `components` defaults to the offline backend; `compile_kwargs` go to
    `StateGraph.compile` (e.g. `checkpointer=` for human review and multi-turn threads)."""
    parts = components or offline_components()
    graph = StateGraph(State, context_schema=Context, input_schema=InputState, output_schema=OutputState)
    for node in NODES:
        graph.add_node(node.__name__.rsplit(".", 1)[-1], node.make(parts))

    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "retrieve")
    graph.add_edge("retrieve", "grade_documents")
    branch = graph.add_conditional_edges  # every other edge is a decision taken in routing.py
    branch("grade_documents", _route(routing.after_grading), ["refine", "rewrite_query", "finalize"])
    branch("refine", _route(routing.after_refine), ["web_search", "generate", "rewrite_query", "finalize"])
    branch("rewrite_query", _route(routing.after_rewrite), ["web_search", "retrieve", "finalize"])
    branch("web_search", _route(routing.after_web_search), ["generate", "rewrite_query", "finalize"])
    branch("generate", _route(routing.after_generate), ["check_hallucination", "rewrite_query", "finalize"])
    branch("check_hallucination", _route(routing.after_hallucination_check), ["generate", "grade_answer"])
    branch("grade_answer", _route(routing.after_answer_grade), ["finalize", "rewrite_query"])
    branch("finalize", _route(routing.after_finalize), ["human_review", END])
    graph.add_edge("human_review", END)
    return graph.compile(**compile_kwargs)


# The graph `langgraph.json` serves. Cheap to build: models and the index load on first use.
graph = build_graph()
