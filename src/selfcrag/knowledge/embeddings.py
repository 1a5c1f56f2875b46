"""Which embedder a run uses: the local all-MiniLM-L6-v2 (the default, no model-hub download; `minilm.py`), an
OpenAI-compatible embeddings endpoint, or any LangChain `Embeddings` object.

The `embeddings` setting picks the provider per run (`embedder_for`): `local`, or `openai:<model>`; the
`SELFCRAG_EMBEDDINGS_RUNTIME` variable picks the local model's runtime (`onnx`, or `torch` with its extra).
Nothing here loads at import time; `default_embedder()` loads once per process on first use.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np

from selfcrag.context import Context
from selfcrag.endpoints import api_key_for
from selfcrag.errors import EmbeddingModelError
from selfcrag.knowledge.minilm import OnnxMiniLM, TorchMiniLM, normalise
from selfcrag.language import language_of
from selfcrag.text.redaction import redact

if TYPE_CHECKING:
    from selfcrag.contract import Embedder
    from selfcrag.knowledge.vector_store import TextVectors

REMOTE_BATCH = 64  # texts per request to a remote embeddings endpoint


def reads(embedder: Embedder, text: str) -> bool:
    """Whether the embedder's similarities mean anything for the language of `text`."""
    languages = getattr(embedder, "languages", None)
    return languages is None or language_of(text) in languages


def _describe(embeddings: Any) -> str:
    """`langchain/<class>/<model>@<host>`: what an index records, so vectors of another model or server are
    refused at load instead of silently compared."""
    name = f"langchain/{type(embeddings).__name__}"
    for attribute in ("model", "model_name", "model_id", "deployment"):
        if isinstance(value := getattr(embeddings, attribute, None), str) and value:
            name += f"/{value}"
            break
    for attribute in ("openai_api_base", "base_url"):
        if isinstance(value := getattr(embeddings, attribute, None), str) and value:
            name += f"@{urlsplit(value).netloc or value}"
            break
    return name


class LangChainEmbedder:
    """Any LangChain `Embeddings` object as an Embedder (vectors normalised so dot = cosine). A failing call
    raises EmbeddingModelError, which the CLI prints as one line. Many texts go out as requests of REMOTE_BATCH
    texts, `concurrency` of them at once (default: the `embed_concurrency` setting)."""

    def __init__(self, embeddings: Any, name: str | None = None, concurrency: int | None = None) -> None:
        self._embeddings = embeddings
        self.name = name or _describe(embeddings)
        self.concurrency = max(1, concurrency or _operator_settings().embed_concurrency)

    def _call(self, method: str, arg: Any) -> np.ndarray:
        try:
            return np.asarray(getattr(self._embeddings, method)(arg), dtype=np.float32)
        except Exception as exc:  # network, authentication, a server that speaks another protocol
            said = redact(str(exc))  # a 401 body may echo the key
            raise EmbeddingModelError(f"embeddings {self.name} failed: {type(exc).__name__}: {said}") from exc

    def embed_batches(self, texts: Sequence[str]) -> Iterator[tuple[list[int], np.ndarray]]:
        """The vectors of `texts`, request after request in order: (row numbers, their vectors). At most
        `concurrency` requests are in flight; the first failure cancels those not yet sent and is raised."""
        groups = [list(range(start, min(start + REMOTE_BATCH, len(texts))))
                  for start in range(0, len(texts), REMOTE_BATCH)]
        if len(groups) <= 1 or self.concurrency == 1:
            for rows in groups:
                yield rows, normalise(self._call("embed_documents", [texts[i] for i in rows]))
            return
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="embed") as pool:
            pending: deque[tuple[list[int], Future[np.ndarray]]] = deque()
            try:
                for rows in groups:
                    pending.append((rows, pool.submit(self._call, "embed_documents", [texts[i] for i in rows])))
                    if len(pending) == self.concurrency:
                        done, future = pending.popleft()
                        yield done, normalise(future.result())
                while pending:
                    done, future = pending.popleft()
                    yield done, normalise(future.result())
            finally:  # a failure, or a caller that stopped reading: send nothing more
                for _, future in pending:
                    future.cancel()

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        out: np.ndarray | None = None
        for rows, vectors in self.embed_batches(texts):
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        assert out is not None
        return out

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = normalise(self._call("embed_query", text).reshape(1, -1))[0]
        return vector


def _operator_settings() -> Context:
    return Context.from_env()


def openai_embedder(model: str) -> LangChainEmbedder:
    """`OpenAIEmbeddings` (langchain-openai) for `model` at OPENAI_BASE_URL (default: api.openai.com)."""
    from langchain_openai import OpenAIEmbeddings
    from pydantic import SecretStr

    # Only the operator's endpoint, never one a run chose, so OPENAI_API_KEY goes only where it was configured to.
    base_url = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or None
    api_key = api_key_for(base_url)  # a local server without a key gets a dummy (vLLM, Ollama accept any)
    if api_key is None:
        raise EmbeddingModelError(f"embeddings openai:{model} need OPENAI_API_KEY (or OPENAI_BASE_URL for a "
                                  "local OpenAI-compatible server)")
    embeddings = OpenAIEmbeddings(
        model=model,
        base_url=base_url,
        api_key=SecretStr(api_key),
        # Send text, not tiktoken token ids: compatible servers expect text, and tiktoken would download its
        # vocabulary on first use.
        check_embedding_ctx_length=False,
    )
    return LangChainEmbedder(embeddings)


def embedder_for(spec: str) -> Embedder:
    """The embedder named by the `embeddings` setting: `local` (MiniLM, offline) or `openai:<model>`. One per
    spec and endpoint per process."""
    spec = spec.strip()
    if spec == "local":
        return default_embedder()
    if spec.startswith("openai:") and spec.removeprefix("openai:").strip():
        endpoint = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or ""
        return _openai_cached(spec.removeprefix("openai:").strip(), endpoint)
    raise EmbeddingModelError(f"unknown embeddings {spec!r}; use 'local' or 'openai:<model>'")


@lru_cache(maxsize=8)
def _openai_cached(model: str, endpoint: str) -> LangChainEmbedder:
    return openai_embedder(model)  # `endpoint` is part of the cache key: a new OPENAI_BASE_URL, a new client


def for_run(embedder: Embedder, settings: Context) -> Embedder:
    """The embedder a run uses. The default one (backend.LazyEmbedder) follows the run's `embeddings` setting;
    an embedder passed to `offline_components`/`build_graph` is used as given."""
    pick = getattr(embedder, "for_settings", None)
    return pick(settings) if callable(pick) else embedder


def stored_for_run(embedder: Embedder, settings: Context | None) -> TextVectors | None:
    """The stored vectors a run's components may read: those of the index the run searches, which the offline
    components' embedder knows (backend.IndexEmbedder). An embedder given to a component directly knows no index,
    so it gets none, and neither does a call without a run's settings."""
    find = getattr(embedder, "text_vectors", None)
    return find(settings) if settings is not None and callable(find) else None


@lru_cache(maxsize=2)
def default_embedder(runtime: str | None = None) -> OnnxMiniLM | TorchMiniLM:
    """The process-wide local embedder. `runtime` (or SELFCRAG_EMBEDDINGS_RUNTIME): `onnx` (default) or `torch`."""
    runtime = (runtime or os.environ.get("SELFCRAG_EMBEDDINGS_RUNTIME") or "onnx").lower()
    if runtime == "onnx":
        return OnnxMiniLM(threads=_operator_settings().embed_threads)
    if runtime == "torch":
        return TorchMiniLM()
    raise EmbeddingModelError(f"unknown embeddings runtime {runtime!r}; use 'onnx' or 'torch'")


# --- embeddings ---------------------------------------------------------------------------------------------

_CACHE_SIZE = 8192
EmbeddingCaches = weakref.WeakKeyDictionary[object, OrderedDict[str, np.ndarray]]  # per embedder: text -> vector
_caches: EmbeddingCaches = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@contextlib.contextmanager
def embedding_caches(caches: EmbeddingCaches) -> Iterator[None]:
    """Embed with `caches` (start with an empty `EmbeddingCaches()`) instead of the process's own while inside.
    The evaluation runs the graph and plain RAG over one embedder: with one cache, plain found each question's
    vector already computed by the graph's run and its CPU read far too low. One call at a time: the swap is
    process-wide."""
    global _caches
    with _lock:
        before, _caches = _caches, caches
    try:
        yield
    finally:
        with _lock:
            _caches = before


def embed(embedder: Embedder, texts: list[str], stored: TextVectors | None = None) -> np.ndarray:
    """Embeddings of `texts`: from `stored`, the stored vectors of the index the run searches (`stored_for_run`),
    where it has them, else from a small per-embedder cache (grading, refinement, generation and the groundedness
    check embed many of the same sentences in one run), else in one batch call for the rest. The cache holds only
    what the embedder computed, which no index changes, so runs over different indexes may share it."""
    if not texts:
        return embedder.embed_documents([])
    found = stored.lookup(embedder, texts) if stored is not None else {}
    todo = [t for t in dict.fromkeys(texts) if t not in found]
    if not todo:
        return np.stack([found[t] for t in texts])
    try:
        with _lock:
            cache = _caches.setdefault(embedder, OrderedDict())
            found.update((t, cache[t]) for t in todo if t in cache)
    except TypeError:  # an embedder that cannot be weakly referenced: no cache
        found.update(zip(todo, embedder.embed_documents(todo), strict=True))
        return np.stack([found[t] for t in texts])
    todo = [t for t in todo if t not in found]
    if todo:
        found.update(zip(todo, embedder.embed_documents(todo), strict=True))
        with _lock:
            for text in todo:
                cache[text] = found[text]
            while len(cache) > _CACHE_SIZE:
                cache.popitem(last=False)
    return np.stack([found[t] for t in texts])


def query_vector(embedder: Embedder, query: str) -> np.ndarray:
    """The retriever's vector of `query` (`embed_query`), kept in the cache `embed()` reads: the graders then
    compare the same question without embedding it a second time (a third of a warm question's model calls).
    For the local model a query's and a document's vector are the same; for a LangChain embedder that tells them
    apart, the graders see the question as the query it is."""
    try:
        with _lock:
            cache = _caches.setdefault(embedder, OrderedDict())
            if query in cache:
                return cache[query]
    except TypeError:  # an embedder that cannot be weakly referenced: no cache
        return np.asarray(embedder.embed_query(query), dtype=np.float32)
    vector = np.asarray(embedder.embed_query(query), dtype=np.float32)
    with _lock:
        cache[query] = vector
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
    return vector
