"""The set of components one graph uses: `offline_components()` (no model, no key), `model_components()` (chat
models), or `auto_components()`, which picks one of the two per run (models when OPENAI_API_KEY or
OPENAI_BASE_URL is set) and is what `build_graph()` uses by default."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from selfcrag.context import Context
from selfcrag.contract import (
    AnswerGrader,
    AnswerVerifier,
    Embedder,
    Generator,
    GroundednessChecker,
    InjectionScreen,
    QueryRewriter,
    QuestionRouter,
    Refiner,
    RelevanceGrader,
    Retriever,
    Strip,
    Verification,
    WebSearch,
)
from selfcrag.endpoints import model_configured
from selfcrag.errors import ComponentError, IngestError
from selfcrag.knowledge.embeddings import default_embedder, embedder_for, for_run
from selfcrag.knowledge.loaded_indexes import index_for
from selfcrag.knowledge.metadata_filter import tenant_filter
from selfcrag.knowledge.scoped import ScopedIndex
from selfcrag.web_search import TavilyWebSearch

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from selfcrag.knowledge.vector_store import TextVectors


class LazyEmbedder:
    """The local embedder, loaded on first use: building a graph (or importing selfcrag) stays cheap. Components
    ask it `for_settings(run settings)`, so the `embeddings` setting can pick another provider per run."""

    def __init__(self, runtime: str | None = None) -> None:
        self._runtime = runtime
        self._embedder: Embedder | None = None

    def _load(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder(self._runtime)
        return self._embedder

    def for_settings(self, settings: Context) -> Embedder:
        if settings.embeddings.strip() == "local":
            return self._load()
        return embedder_for(settings.embeddings)

    @property
    def name(self) -> str:
        return self._load().name

    @property
    def languages(self) -> frozenset[str] | None:
        return getattr(self._load(), "languages", None)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._load().embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._load().embed_query(text)


def _offline_router() -> QuestionRouter:
    from selfcrag.offline.router import OfflineRouter

    return OfflineRouter()


def _no_screen() -> InjectionScreen:
    from selfcrag.offline.screen import NoScreen

    return NoScreen()


class _VerifierWhenAsked:
    """The model verifier, loaded at its first question: it is off by default, and its modules (structured
    output, grading prompts) cost a cold offline ask ~10 ms to import for nothing."""

    def __init__(self) -> None:
        self._inner: AnswerVerifier | None = None

    def verify(self, question: str, answer: str, strips: list[Strip], settings: Context) -> Verification:
        if self._inner is None:
            from selfcrag.llm.verifier import ModelVerifier

            self._inner = ModelVerifier()
        return self._inner.verify(question, answer, strips, settings)


def _verifier() -> AnswerVerifier:
    return _VerifierWhenAsked()


@dataclass
class Components:
    relevance: RelevanceGrader
    refiner: Refiner
    generator: Generator
    groundedness: GroundednessChecker
    answer_grader: AnswerGrader
    rewriter: QueryRewriter
    web: WebSearch
    router: QuestionRouter = field(default_factory=_offline_router)  # before retrieval: direct, web or retrieve
    retriever: Retriever | None = None  # None: the index named by settings.index_dir, else the bundled sample
    embedder: Embedder | None = None  # builds and reads the default index
    # Asked about the draft to show when the `verifier` setting names a model (either backend; off by default).
    verifier: AnswerVerifier = field(default_factory=_verifier)
    # Asked about every retrieved passage, after the detector: the model-judged injection check (model backend).
    screen: InjectionScreen = field(default_factory=_no_screen)

    def __post_init__(self) -> None:
        for role, protocol in ROLE_CONTRACTS.items():
            part = getattr(self, role)
            problem = "" if part is None or isinstance(part, _Chosen) else unfit(part, protocol)
            if problem:
                raise ComponentError(f"the {role} component {type(part).__name__}: {problem}")

    def retriever_for(self, settings: Context) -> Retriever:
        return searched(self.retriever, self.embedder, settings)


ROLE_CONTRACTS: dict[str, type] = {
    "relevance": RelevanceGrader, "refiner": Refiner, "generator": Generator, "groundedness": GroundednessChecker,
    "answer_grader": AnswerGrader, "rewriter": QueryRewriter, "web": WebSearch, "router": QuestionRouter,
    "retriever": Retriever, "verifier": AnswerVerifier, "screen": InjectionScreen,
}  # fmt: skip


def unfit(part: object, protocol: type) -> str:
    """Why `part` cannot serve as `protocol` ("" when it can): a method missing, or one whose parameters cannot
    take what a node passes (the contract's required arguments by position, its optional ones by name). A checker
    written before `check` gained `given` would otherwise fail inside every run and be read as a model fault."""
    for name, member in vars(protocol).items():
        if name.startswith("_") or not callable(member):
            continue
        method = getattr(part, name, None)
        if not callable(method):
            return f"has no method {name}()"
        try:
            wanted = list(inspect.signature(member).parameters.values())[1:]  # without self
            own = inspect.signature(method)
        except (TypeError, ValueError):  # a builtin or C method without a readable signature: trust it
            continue
        required = [p for p in wanted if p.default is inspect.Parameter.empty]
        optional = {p.name: None for p in wanted if p.default is not inspect.Parameter.empty}
        try:
            own.bind(*required, **optional)
        except TypeError as error:
            names = ", ".join(p.name for p in wanted)
            return f"{name}() must accept ({names}) as selfcrag.contract.{protocol.__name__} says: {error}"
    return ""


def searched(retriever: Retriever | None, embedder: Embedder | None, settings: Context) -> Retriever:
    """The index a run searches: the components' `retriever`, else the LangChain store `settings.retriever_factory`
    names, else the index `settings.index_dir` names, else the bundled sample (each made once per process, with
    the run's embedder); with the `tenant` setting, seen only through its filter (knowledge/scoped.py)."""
    if retriever is not None:
        index = retriever
    elif settings.retriever_factory:
        from selfcrag.knowledge.configured import configured_retriever  # only a deployment that names one loads it

        index = configured_retriever(settings, for_run(embedder or LazyEmbedder(), settings))
    else:
        index = index_for(settings, for_run(embedder, settings) if embedder else None)
    where = tenant_filter(settings.tenant)
    return index if where is None else ScopedIndex(index, where)


class IndexEmbedder:
    """What the offline components embed with: `embedder` (per run, the one the run's settings pick: `for_run`),
    and the stored vectors (vector_store) of the index the run searches, found as the run's retrieval finds it.

    Only that index's, never another loaded one's: late chunking reads a stored sentence in its chunk's context, so
    two indexes holding one sentence (a server's two graphs, an evaluation over several corpora, an index and its
    rebuild) store two vectors for it, and a run over one graded with the other's would decide by what else its
    process had loaded. A text the store lacks is embedded alone, as before."""

    def __init__(self, embedder: Embedder, retriever: Retriever | None) -> None:
        self.embedder = embedder
        self.retriever = retriever

    def for_settings(self, settings: Context) -> Embedder:
        return for_run(self.embedder, settings)

    def text_vectors(self, settings: Context) -> TextVectors | None:
        try:
            index = searched(self.retriever, self.embedder, settings)
        except IngestError:  # the index went away since the run retrieved from it: embed, as without a store
            return None
        return getattr(index, "text_vectors", None)

    # An Embedder itself, for a component called without a run's settings.
    @property
    def name(self) -> str:
        return self.embedder.name

    @property
    def languages(self) -> frozenset[str] | None:
        return getattr(self.embedder, "languages", None)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embedder.embed_query(text)


def offline_components(
    retriever: Retriever | None = None, embedder: Embedder | None = None, web: WebSearch | None = None
) -> Components:
    """Deterministic components that need no model: the default when none is configured."""
    # The reasoners are imported when a backend is built, for start-up time: a run loads only the one it uses.
    from selfcrag.offline.extractive import ExtractiveGenerator
    from selfcrag.offline.groundedness import OfflineGroundednessChecker
    from selfcrag.offline.offline_grading import OfflineAnswerGrader, OfflineRelevanceGrader
    from selfcrag.offline.refine import StripRefiner
    from selfcrag.offline.rewrite import KeywordRewriter
    from selfcrag.offline.router import OfflineRouter

    shared: Embedder = embedder or LazyEmbedder()
    reading = IndexEmbedder(shared, retriever)  # the stored vectors of the index each run searches
    return Components(
        relevance=OfflineRelevanceGrader(reading),
        refiner=StripRefiner(reading),
        generator=ExtractiveGenerator(reading),
        groundedness=OfflineGroundednessChecker(reading),
        answer_grader=OfflineAnswerGrader(reading),
        rewriter=KeywordRewriter(),
        web=web or TavilyWebSearch(),
        router=OfflineRouter(),
        retriever=retriever,
        embedder=shared,
    )


def model_components(
    llm: BaseChatModel | None = None,
    grader_llm: BaseChatModel | None = None,
    retriever: Retriever | None = None,
    embedder: Embedder | None = None,
    web: WebSearch | None = None,
) -> Components:
    """Components on chat models. `llm` writes the answers and, unless `grader_llm` is given, grades too; without
    model objects both are built from each run's settings (`generator_model`, `grader_model`, `base_url`).
    Retrieval (and its local embeddings) and web search are the offline ones."""
    # Imported here, for start-up time: an offline run never loads the model backend.
    from selfcrag.llm.answer_grade import LLMAnswerGrader
    from selfcrag.llm.generator import LLMGenerator
    from selfcrag.llm.groundedness import LLMGroundednessChecker
    from selfcrag.llm.models import ChatModels
    from selfcrag.llm.refiner import LLMRefiner
    from selfcrag.llm.relevance import LLMRelevanceGrader
    from selfcrag.llm.rewriter import LLMRewriter
    from selfcrag.llm.router import LLMRouter
    from selfcrag.llm.screen import ModelScreen

    local = offline_components(retriever, embedder, web)
    models = ChatModels(llm, grader_llm)
    return Components(
        relevance=LLMRelevanceGrader(models),
        refiner=LLMRefiner(models),
        generator=LLMGenerator(models),
        groundedness=LLMGroundednessChecker(models),
        answer_grader=LLMAnswerGrader(models),
        rewriter=LLMRewriter(models),
        web=local.web,
        router=LLMRouter(models),
        screen=ModelScreen(models),
        retriever=local.retriever,
        embedder=local.embedder,
    )


class _Backends:
    """The offline and the model backend, each built on first use, sharing the embedder and web search."""

    def __init__(self, retriever: Retriever | None, embedder: Embedder, web: WebSearch) -> None:
        self.shared = (retriever, embedder, web)
        self._built: dict[str, Components] = {}
        self._lock = threading.Lock()

    def choose(self, settings: Context) -> Components:
        kind = settings.backend
        if kind == "auto":
            kind = "model" if model_configured() else "offline"
        with self._lock:
            if kind not in self._built:
                build = model_components if kind == "model" else offline_components
                retriever, embedder, web = self.shared
                self._built[kind] = build(retriever=retriever, embedder=embedder, web=web)
            return self._built[kind]


class _Chosen:
    """One component role (e.g. `relevance`) of the backend each call's settings choose. Every component method
    takes the run's `Context`, so the choice is made per run, never at import or compile time."""

    def __init__(self, backends: _Backends, role: str) -> None:
        self._backends = backends
        self._role = role

    def __getattr__(self, method: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            settings = next(a for a in [*args, *kwargs.values()] if isinstance(a, Context))
            return getattr(getattr(self._backends.choose(settings), self._role), method)(*args, **kwargs)

        return call


def auto_components(
    retriever: Retriever | None = None, embedder: Embedder | None = None, web: WebSearch | None = None
) -> Components:
    """Models when the run's `backend` setting says so, or (`auto`) when OPENAI_API_KEY or OPENAI_BASE_URL is set;
    else offline. Nothing is loaded or connected until a run needs it."""
    backends = _Backends(retriever, embedder or LazyEmbedder(), web or TavilyWebSearch())
    roles = ("relevance", "refiner", "generator", "groundedness", "answer_grader", "rewriter", "router", "screen")
    chosen: dict[str, Any] = {role: _Chosen(backends, role) for role in roles}
    _, shared_embedder, shared_web = backends.shared
    return Components(**chosen, web=shared_web, retriever=retriever, embedder=shared_embedder)


def component_for(components: Components, role: str, settings: Context) -> Any:
    """The component a run with these settings uses for `role`: the one `auto_components` chooses for the run, or
    the one given."""
    chosen = getattr(components, role)
    return getattr(chosen._backends.choose(settings), role) if isinstance(chosen, _Chosen) else chosen
