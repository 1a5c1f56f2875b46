"""The self-corrective RAG state machine (Corrective RAG + Self-RAG), and only that.

    prepare -> contextualize -> route_question --retrieve--> retrieve
    route_question --direct (conversation)--> finalize;  --web_search (outside the knowledge base)--> web_search
    retrieve --first round--> first_draft (plain's single pass) -> (check_hallucination || grade_answer) -> judge
             --later rounds--> grade_documents
    judge --best candidate at the floor--> finalize                    (every draft is a candidate: judge scores it)
          --below it: plain's draft--> grade_documents;  an ungrounded draft, generations left--> generate
          --otherwise, rounds left--> rewrite_query;  otherwise --> finalize
    grade_documents --correct/ambiguous--> refine --ambiguous--> web_search -> generate
                    --incorrect---------> rewrite_query --web--> web_search -> generate
                                                        --kb---> retrieve (repeat: finalize)
    generate -> (check_hallucination || grade_answer, concurrently) -> judge
    finalize (shows the best candidate, or abstains below the floor)
             --low confidence, human review on--> human_review (interrupt) -> END;  otherwise -> END
    (every way to finalize goes through verify first when the `verifier` setting is on and a draft was kept)
    (retrieve --a question the evidence cannot read--> finalize;  human_review --unusable reply--> human_review;
     retrieve --a correction round with no new chunk--> generate (evidence not yet drafted from), else finalize)
    (contextualize: a follow-up that leans on the conversation is rewritten to stand alone; others pass as asked)

Every loop is bounded by the graph's own counters in `routing.py`, never by the recursion limit. Nodes that
call models run within the run's call budget and deadline (`bounded`); their calls retry transient faults
themselves (llm/calls.py), so no node has a RetryPolicy: re-running a whole node lost the failed
attempt's counts. Other faults degrade inside the components, never crash.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from selfcrag import routing
from selfcrag.backend import Components, auto_components, model_components
from selfcrag.context import Context
from selfcrag.nodes import (
    bounded,
    check_hallucination,
    contextualize,
    finalize,
    first_draft,
    generate,
    grade_answer,
    grade_documents,
    human_review,
    judge,
    prepare,
    refine,
    retrieve,
    rewrite_query,
    route_question,
    verify,
    web_search,
)
from selfcrag.setting_names import check_configurable
from selfcrag.state import InputState, OutputState, State
from selfcrag.tool import SelfCragGraph
from selfcrag.trust_boundary import OperatorSettings, resolve

if TYPE_CHECKING:  # langchain_core.language_models pulls LangSmith's tracers: ~0.3 s of every CLI start
    from langchain_core.language_models import BaseChatModel

NODES = (prepare, contextualize, route_question, retrieve, first_draft, grade_documents, refine, web_search, generate,
         check_hallucination, grade_answer, judge, rewrite_query, verify, finalize, human_review)  # fmt: skip
MODEL_NODES = {"contextualize", "route_question", "retrieve", "first_draft", "grade_documents", "refine", "web_search",
               "generate", "check_hallucination", "grade_answer", "rewrite_query", "verify"}  # fmt: skip
NAME = "selfcrag"  # of the compiled graph: traces and Studio show it (LangGraph's default is "LangGraph")


def operator_settings(settings: Context | dict[str, Any] | None) -> Callable[[], Context]:
    """The deployment's settings, read at run time: the environment, then what `build_graph(settings=...)` fixed
    (made again only when the environment changed: `OperatorSettings`)."""
    fixed = settings.model_dump(exclude_unset=True) if isinstance(settings, Context) else dict(settings or {})
    return OperatorSettings(fixed)


def _with_settings(node: Callable[..., Any], base: Callable[[], Context]) -> Callable[..., Any]:
    """Every node and route sees the run's settings already resolved against the operator's (the trust boundary in
    context.py), so a run that asks for an operator setting fails at its first step with one clear line."""
    if "runtime" not in inspect.signature(node).parameters:
        return node

    def with_settings(state: State, runtime: Runtime[Context]) -> Any:
        check_configurable(get_config(), runtime.context, Context.model_fields)
        return node(state, runtime.override(context=resolve(runtime.context, base())))

    with_settings.__name__ = node.__name__
    return with_settings


def _route(decide: Callable[[State, Context], Any]) -> Callable[[State, Runtime[Context]], Any]:
    """Conditional edges call the pure routing functions with the run's (resolved) settings."""

    def route(state: State, runtime: Runtime[Context]) -> Any:  # a node name, or several to run at once
        return decide(state, runtime.context)

    route.__name__ = decide.__name__
    return route


def build_graph(
    components: Components | None = None,
    *,
    llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
    settings: Context | dict[str, Any] | None = None,
    **compile_kwargs: Any,
) -> CompiledStateGraph[Any, Any, Any, Any]:  # runs take a dict context too
    """Compile the graph. `components` wins; else `llm` / `grader_llm` (any LangChain chat model) give the model
    backend; else each run picks models or offline by its settings and the environment (`auto_components`).
    `settings` are the operator's (index, models, endpoints, caps; the environment fills the rest): a run's
    `context` may change only run settings, within the caps (the trust boundary in context.py).
    `compile_kwargs` go to `StateGraph.compile` (e.g. `checkpointer=` for human review and multi-turn threads).
    The compiled graph's `as_tool()` takes a question and returns the answer, decision and sources (tool.py)."""
    if components is None:
        models_given = llm is not None or grader_llm is not None
        components = model_components(llm, grader_llm) if models_given else auto_components()
    base = operator_settings(settings)
    graph = StateGraph(State, context_schema=Context, input_schema=InputState, output_schema=OutputState)
    for node in NODES:
        name = node.__name__.rsplit(".", 1)[-1]
        made = node.make(components)  # bounded inside _with_settings: the run's limits come from resolved settings
        turn = routing.CHECKS.index(name) if name in routing.CHECKS else 0  # the checks' first calls, in order
        graph.add_node(name, _with_settings(bounded(made, turn) if name in MODEL_NODES else made, base))

    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "contextualize")
    graph.add_edge("contextualize", "route_question")

    def branch(source: str, decide: Callable[[State, Context], Any], targets: list[str]) -> None:
        if "finalize" in targets:  # the local verifier, when on, looks at the draft first
            decide, targets = routing.through_verify(decide), [*targets, "verify"]
        graph.add_conditional_edges(source, _with_settings(_route(decide), base), targets)  # decided in routing.py

    branch("route_question", routing.after_route, ["retrieve", "web_search", "finalize"])
    branch("retrieve", routing.after_retrieve, ["first_draft", "grade_documents", "generate", "finalize"])
    branch("first_draft", routing.after_first_draft, [*routing.CHECKS, "grade_documents"])
    branch("grade_documents", routing.after_grading, ["refine", "rewrite_query", "finalize"])
    branch("refine", routing.after_refine, ["web_search", "generate", "rewrite_query", "finalize"])
    branch("rewrite_query", routing.after_rewrite, ["web_search", "retrieve", "generate", "finalize"])
    branch("web_search", routing.after_web_search, ["generate", "retrieve", "rewrite_query", "finalize"])
    branch("generate", routing.after_generate, [*routing.CHECKS, "rewrite_query", "finalize"])
    graph.add_edge(routing.CHECKS, "judge")  # waits for both checks
    graph.add_edge("verify", "finalize")
    branch("judge", routing.after_judge, ["grade_documents", "generate", "rewrite_query", "finalize"])
    branch("finalize", routing.after_finalize, ["human_review", END])
    branch("human_review", routing.after_review, ["human_review", END])
    # `as_tool` made for models: selfcrag/tool.py
    return SelfCragGraph.of(graph.compile(**{"name": NAME, **compile_kwargs}))


# The graph `langgraph.json` serves. Cheap to build: models and the index load on first use, and each run uses
# models when OPENAI_API_KEY or OPENAI_BASE_URL is set (or `backend="model"`), else the offline components.
graph = build_graph()
