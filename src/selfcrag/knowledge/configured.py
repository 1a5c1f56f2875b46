"""A LangChain `VectorStore` or retriever named by the operator's `retriever_factory` setting, searched in place of
the two built-in indexes (the directory, the postgresql:// URL): a deployment points at the store it already has
(Chroma, PGVector, Elasticsearch, Pinecone, ...) without writing a graph module.

`retriever_factory` is `module:attribute`, a class or a function; it is imported on first use (a process that never
searches never imports the store's package) and called once per process with `retriever_kwargs`. Its parameter
`embedding_function`, `embedding` or `embeddings`, when it has one and the keyword arguments leave it out, gets the
run's embeddings (the `embeddings` setting) as a LangChain `Embeddings`: JSON cannot carry an object, and a store
must embed queries as its documents were embedded. What it returns is searched so:
- a `VectorStore`: the run's `k` best with their relevance scores (`similarity_search_with_relevance_scores`),
  or by rank where the store gives no scores;
- a `BaseRetriever`: as it returns them (`LangChainRetriever`, retrieval.py), cut to the run's `k`.
"""

from __future__ import annotations

import importlib
import inspect
import json
import threading
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore

from selfcrag.contract import Embedder, Passage
from selfcrag.errors import IngestError
from selfcrag.knowledge.retrieval import LangChainRetriever, embedder_label

if TYPE_CHECKING:
    from selfcrag.context import Context

EMBEDDING_PARAMETERS = ("embedding_function", "embedding", "embeddings")  # Chroma's, InMemory/FAISS', PGVector's
_built: dict[tuple[str, str, str], ConfiguredRetriever] = {}
_lock = threading.Lock()


class AsEmbeddings(Embeddings):
    """A selfcrag embedder as a LangChain `Embeddings`, for a store that embeds its queries itself."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.embedder.embed_documents(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self.embedder.embed_query(text)]


class _Scored(BaseRetriever):
    """A vector store's `k` best for one query, each with its relevance score in its metadata (`score`), which is
    how `LangChainRetriever` reads a result's score."""

    store: Any  # VectorStore (Any: pydantic would try to validate it)
    k: int

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        try:
            found = self.store.similarity_search_with_relevance_scores(query, k=self.k)
        except NotImplementedError:  # a store without a relevance function: ranked, scored by rank
            return list(self.store.similarity_search(query, k=self.k))
        return [Document(page_content=doc.page_content, id=doc.id, metadata={**doc.metadata, "score": score})
                for doc, score in found]  # fmt: skip


class ConfiguredRetriever:
    """Our Retriever over what the factory made: a VectorStore, searched for the run's k, or a BaseRetriever."""

    def __init__(self, made: VectorStore | BaseRetriever) -> None:
        self.made = made
        self._as_given = LangChainRetriever(made) if isinstance(made, BaseRetriever) else None

    def retrieve(self, query: str, settings: Context) -> list[Passage]:
        if self._as_given is not None:
            return self._as_given.retrieve(query, settings)
        return LangChainRetriever(_Scored(store=self.made, k=settings.k)).retrieve(query, settings)


def configured_retriever(settings: Context, embedder: Embedder) -> ConfiguredRetriever:
    """The retriever `settings.retriever_factory` names, made once per process for the same factory, keyword
    arguments and embeddings (a server's concurrent first runs make it once). Raises IngestError in one line."""
    key = (settings.retriever_factory, json.dumps(settings.retriever_kwargs, sort_keys=True), embedder_label(embedder))
    with _lock:
        if key not in _built:
            _built[key] = ConfiguredRetriever(_make(settings.retriever_factory, settings.retriever_kwargs, embedder))
        return _built[key]


def _make(path: str, kwargs: dict[str, Any], embedder: Embedder) -> VectorStore | BaseRetriever:
    module_name, _, attribute = path.partition(":")
    named = f"retriever_factory {path}"
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except ImportError as exc:
        raise IngestError(f"{named}: cannot import {module_name} ({_line(exc)}); install the package that "
                          "provides it") from None  # fmt: skip
    except AttributeError:
        raise IngestError(f"{named}: module {module_name} has no {attribute}") from None
    arguments = dict(kwargs)
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin without a readable signature: called with the kwargs alone
        parameters = {}  # type: ignore[assignment]
    wanted = next((p for p in EMBEDDING_PARAMETERS if p in parameters and p not in arguments), "")
    if wanted:
        arguments[wanted] = AsEmbeddings(embedder)
    try:
        made = factory(**arguments)
    except Exception as exc:  # noqa: BLE001 (the operator's factory: any fault is said in one line)
        raise IngestError(f"{named}(**retriever_kwargs) failed: {type(exc).__name__}: {_line(exc)}") from None
    if not isinstance(made, VectorStore | BaseRetriever):
        raise IngestError(f"{named} returned a {type(made).__name__}, not a LangChain VectorStore or BaseRetriever")
    return made


def _line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
