"""selfcrag: a LangGraph state machine for self-corrective RAG (Corrective RAG + Self-RAG).

    from selfcrag import graph, ask
    ask("How many days do I have to return an item?")["answer"]
    await aask("How many days do I have to return an item?")  # the same, in async code

Importing is cheap: the embedding model and the index load on the first run.
"""

from __future__ import annotations

import logging
import sys
import types
from importlib import import_module
from typing import TYPE_CHECKING, Any

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
    LeaseLostError,
    LocalModelError,
    MethodUnavailable,
    ModelConfigError,
    QuestionError,
    QuestionFileError,
    ReplayedFault,
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

if TYPE_CHECKING:
    __version__: str
    from selfcrag.backend import Components, model_components, offline_components
    from selfcrag.context import Context
    from selfcrag.graph import build_graph, graph
    from selfcrag.knowledge.ingestion import ingest
    from selfcrag.knowledge.langchain_objects import LocalEmbeddings, load_index
    from selfcrag.knowledge.langchain_store import KnowledgeBaseVectorStore

# The API's heavy names load when first used (PEP 562), so that `import selfcrag.anything` (the CLI, its
# `--version` and `--help`) does not import LangGraph, LangChain and the graph: the name and the module it is in.
LAZY = {"Components": "selfcrag.backend", "model_components": "selfcrag.backend",
        "offline_components": "selfcrag.backend", "Context": "selfcrag.context", "build_graph": "selfcrag.graph",
        "graph": "selfcrag.graph", "ingest": "selfcrag.knowledge.ingestion",
        "LocalEmbeddings": "selfcrag.knowledge.langchain_objects",
        "load_index": "selfcrag.knowledge.langchain_objects",
        "KnowledgeBaseVectorStore": "selfcrag.knowledge.langchain_store"}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name == "__version__":  # read from the installed metadata when asked: finding it scans the path
        globals()[name] = _installed_version()
        return globals()[name]
    if name not in LAZY:
        raise AttributeError(f"module 'selfcrag' has no attribute {name!r}")
    value = getattr(import_module(LAZY[name]), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """`selfcrag.graph` is the compiled graph, as `from selfcrag.graph import graph` made it when this module
    imported it: importing the submodule `selfcrag.graph` would otherwise set the attribute to the module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "graph" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = ["Components", "Context", "KnowledgeBaseVectorStore", "LocalEmbeddings", "__version__", "aask", "ask",
           "build_graph", "graph", "ingest", "load_index", "model_components", "offline_components",
           # every error selfcrag raises: one base (SelfcragError), each keeping its ValueError/RuntimeError/... base
           "BudgetSpent", "CalibrationDataError", "CalibrationError", "CallNotRecorded", "CliError", "ComponentError",
           "DamagedFile", "EmbeddingModelError",
           "EmptyQuestionError", "EvalError", "FakeModelError", "IdentityError", "IngestError", "LeaseLostError",
           "LocalModelError",
           "MethodUnavailable", "ModelConfigError", "QuestionError", "QuestionFileError", "ReplayedFault",
           "ResumeError", "ReviewError", "RunTimeSpent", "SelfcragError", "SettingsError", "StoreError",
           "ThreadBusyError", "TotalTimeoutError", "Unreadable", "WebSearchError"]  # fmt: skip

def _installed_version() -> str:
    """One source of truth: pyproject.toml's version, as installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("selfcrag")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


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
        _unkept()
        return dict((compiled_graph or _default_graph()).invoke({"question": question}, context=context))


async def aask(
    question: str,
    context: Context | dict[str, Any] | None = None,
    compiled_graph: Any = None,
    *,
    thread_id: str | None = None,
) -> dict[str, Any]:
    """`ask` for async code (FastAPI and other asyncio apps): the same arguments, output and thread, run with
    `ainvoke` on the store's async checkpointer, so the event loop serves other requests meanwhile. Turns on one
    thread still run one at a time, whichever process or coroutine asks; threads on other ids run concurrently."""
    from selfcrag.errors import StoreError
    from selfcrag.threads import aask_in_thread  # imported here for the reason `ask` gives

    try:
        return await aask_in_thread(question, thread_id, context=context, compiled_graph=compiled_graph)
    except StoreError:
        if thread_id is not None:
            raise
        _unkept()
        return dict(await (compiled_graph or _default_graph()).ainvoke({"question": question}, context=context))


def _default_graph() -> Any:
    """The module-level graph `langgraph.json` serves, imported on first use (a bare `graph` inside this module's
    functions would not reach the lazy `__getattr__`)."""
    from selfcrag.graph import graph

    return graph


def _unkept() -> None:
    logging.getLogger("selfcrag.store").warning("store unavailable: this run is not kept", exc_info=True)
