"""selfcrag: a LangGraph state machine for self-corrective RAG (Corrective RAG + Self-RAG).

    from selfcrag import graph, ask
    ask("How many days do I have to return an item?")["answer"]

Importing is cheap: the embedding model and the index load on the first run.
"""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from selfcrag.backend import Components, model_components, offline_components
from selfcrag.context import Context
from selfcrag.errors import (
    BudgetSpent,
    CalibrationDataError,
    CalibrationError,
    CallNotRecorded,
    CliError,
    ComponentError,
    DamagedFile,
    EmbeddingModelError,
    EmptyQuestionError,
    EvalError,
    FakeModelError,
    IdentityError,
    IngestError,
    LocalModelError,
    MethodUnavailable,
    ModelConfigError,
    QuestionError,
    QuestionFileError,
    ResumeError,
    ReviewError,
    RunTimeSpent,
    SelfcragError,
    SettingsError,
    StoreError,
    ThreadBusyError,
    TotalTimeoutError,
    Unreadable,
    WebSearchError,
)
from selfcrag.graph import build_graph, graph
from selfcrag.knowledge.ingestion import ingest
from selfcrag.knowledge.langchain_objects import LocalEmbeddings, load_index
from selfcrag.knowledge.langchain_store import KnowledgeBaseVectorStore

__all__ = ["Components", "Context", "KnowledgeBaseVectorStore", "LocalEmbeddings", "__version__", "ask", "build_graph",
           "graph", "ingest", "load_index", "model_components", "offline_components",
           # every error selfcrag raises: one base (SelfcragError), each keeping its ValueError/RuntimeError/... base
           "BudgetSpent", "CalibrationDataError", "CalibrationError", "CallNotRecorded", "CliError", "ComponentError",
           "DamagedFile", "EmbeddingModelError",
           "EmptyQuestionError", "EvalError", "FakeModelError", "IdentityError", "IngestError", "LocalModelError",
           "MethodUnavailable", "ModelConfigError", "QuestionError", "QuestionFileError", "ResumeError",
           "ReviewError", "RunTimeSpent", "SelfcragError", "SettingsError", "StoreError", "ThreadBusyError",
           "TotalTimeoutError", "Unreadable", "WebSearchError"]  # fmt: skip

try:  # one source of truth: pyproject.toml's version, as installed
    __version__ = version("selfcrag")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"


def ask(
    question: str,
    context: Context | dict[str, Any] | None = None,
    compiled_graph: Any = None,
    *,
    thread_id: str | None = None,
) -> dict[str, Any]:
    """Run the graph once and return its output (answer, citations, decision, confidence, scores, trace).
    `compiled_graph` defaults to `graph` (models when OPENAI_API_KEY or OPENAI_BASE_URL is set, else offline);
    pass one from `build_graph(...)` to use other components or models.

    The run is a turn of a thread kept in the store (`SELFCRAG_HOME`, or `SELFCRAG_DATABASE_URL`): `thread_id`
    continues that conversation, from any process; without one a new thread starts. The output adds `thread_id`
    and `turn`; a run paused for review adds `review` and waits in `selfcrag review list`. A graph compiled with
    its own checkpointer keeps its threads there. Without a usable store a one-off question still runs, unkept."""
    from selfcrag.errors import StoreError

    # Imported here, not above: the store's database and checkpointer load when a question is asked, so that
    # `import selfcrag` stays cheap (start-up time; no circle: threads imports nothing from this module).
    from selfcrag.threads import ask_in_thread

    try:
        return ask_in_thread(question, thread_id, context=context, compiled_graph=compiled_graph)
    except StoreError:
        if thread_id is not None:
            raise
        logging.getLogger("selfcrag.store").warning("store unavailable: this run is not kept", exc_info=True)
        return dict((compiled_graph or graph).invoke({"question": question}, context=context))
