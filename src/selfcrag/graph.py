"""The self-corrective RAG state machine (Corrective RAG + Self-RAG), and only that.

    prepare -> retrieve -> grade_documents --correct/ambiguous--> refine --ambiguous--> web_search -> generate
                                           --incorrect---------> rewrite_query --web--> web_search -> generate
                                                                               --kb---> retrieve (repeat: finalize)
    generate -> (check_hallucination || grade_answer, concurrently) -> judge
    judge --not grounded, generations left--> generate
          --otherwise: not useful, rounds left--> rewrite_query;  otherwise --> finalize
    finalize --low confidence, human review on--> human_review (interrupt) -> END;  otherwise -> END

Every loop is bounded by the graph's own counters in `routing.py`, never by the recursion limit. Nodes that
call models run within the run's call budget and deadline (`bounded`); their calls retry transient faults
themselves (components/llm/calls.py), so no node has a RetryPolicy: re-running a whole node lost the failed
attempt's counts. Other faults degrade inside the components, never crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from selfcrag import routing
from selfcrag.components.backend import Components, auto_components, model_components
from selfcrag.context import Context, settings_of
from selfcrag.nodes import (
    bounded,
    check_hallucination,
    finalize,
    generate,
    grade_answer,
    grade_documents,
    human_review,
    judge,
    prepare,
    refine,
    retrieve,
    rewrite_query,
    web_search,
)
from selfcrag.state import InputState, OutputState, State

NODES = (prepare, retrieve, grade_documents, refine, web_search, generate, check_hallucination,
         grade_answer, judge, rewrite_query, finalize, human_review)  # fmt: skip
MODEL_NODES = {"grade_documents", "refine", "web_search", "generate", "check_hallucination", "grade_answer",
               "rewrite_query"}  # fmt: skip


def _route(decide: Callable[[State, Context], Any]) -> Callable[[State, Runtime[Context]], Any]:
    """Conditional edges call the pure routing functions with the run's settings."""

    def route(state: State, runtime: Runtime[Context]) -> Any:  # a node name, or several to run at once
        return decide(state, settings_of(runtime.context))

    route.__name__ = decide.__name__
    return route


def build_graph(  # noqa: ANN201
    components: Components | None = None,
    *,
    llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
    **compile_kwargs: Any,
):
    """Compile the graph. `components` wins; else `llm` / `grader_llm` (any LangChain chat model) give the model
    backend; else each run picks models or offline by its settings and the environment (`auto_components`).
    `compile_kwargs` go to `StateGraph.compile` (e.g. `checkpointer=` for human review and multi-turn threads)."""
    if components is None:
        models_given = llm is not None or grader_llm is not None
        components = model_components(llm, grader_llm) if models_given else auto_components()
    graph = StateGraph(State, context_schema=Context, input_schema=InputState, output_schema=OutputState)
    for node in NODES:
        name = node.__name__.rsplit(".", 1)[-1]
        graph.add_node(name, bounded(node.make(components)) if name in MODEL_NODES else node.make(components))

    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "retrieve")
    graph.add_edge("retrieve", "grade_documents")
    branch = graph.add_conditional_edges  # every other edge is a decision taken in routing.py
    branch("grade_documents", _route(routing.after_grading), ["refine", "rewrite_query", "finalize"])
    branch("refine", _route(routing.after_refine), ["web_search", "generate", "rewrite_query", "finalize"])
    branch("rewrite_query", _route(routing.after_rewrite), ["web_search", "retrieve", "finalize"])
    branch("web_search", _route(routing.after_web_search), ["generate", "rewrite_query", "finalize"])
    branch("generate", _route(routing.after_generate), [*routing.CHECKS, "rewrite_query", "finalize"])
    graph.add_edge(routing.CHECKS, "judge")  # waits for both checks
    branch("judge", _route(routing.after_checks), ["generate", "rewrite_query", "finalize"])
    branch("finalize", _route(routing.after_finalize), ["human_review", END])
    graph.add_edge("human_review", END)
    return graph.compile(**compile_kwargs)


# The graph `langgraph.json` serves. Cheap to build: models and the index load on first use, and each run uses
# models when OPENAI_API_KEY or OPENAI_BASE_URL is set (or `backend="model"`), else the offline components.
graph = build_graph()
