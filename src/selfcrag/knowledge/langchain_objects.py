"""selfcrag's parts as LangChain objects, for code built on LangChain rather than on this graph.

- `load_index(DIR)` returns the hybrid index; `index.as_retriever(k=4)` is a `BaseRetriever` (`IndexRetriever`,
  langchain_retriever.py) that fuses FAISS and BM25 and applies the similarity gate exactly as the graph's
  `retrieve` node does.
- `LocalEmbeddings()` is the local all-MiniLM-L6-v2 (offline, no torch) as a LangChain `Embeddings`, usable with
  any vector store. An index ingested with it is the same as one ingested with the default `local` embeddings.

The other direction (a LangChain retriever or `Embeddings` inside selfcrag) is `LangChainRetriever` in
retrieval.py and `LangChainEmbedder` in embeddings.py; `as_embedder` picks between them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from selfcrag.context import Context
from selfcrag.contract import Embedder
from selfcrag.knowledge.embeddings import LangChainEmbedder, default_embedder, embedder_for
from selfcrag.knowledge.loaded_indexes import open_index

if TYPE_CHECKING:
    from selfcrag.knowledge.minilm import OnnxMiniLM, TorchMiniLM
    from selfcrag.knowledge.retrieval import HybridIndex


class LocalEmbeddings(Embeddings):
    """The local all-MiniLM-L6-v2 embeddings (384 dimensions, unit length, English) as a LangChain `Embeddings`.
    The model loads on first use, once per process. `runtime`: `onnx` (default) or `torch` (the torch extra)."""

    def __init__(self, runtime: str | None = None) -> None:
        self.runtime = runtime

    @property
    def embedder(self) -> OnnxMiniLM | TorchMiniLM:
        # default_embedder() and default_embedder(None) are two cache entries: two models in memory.
        return default_embedder(self.runtime) if self.runtime else default_embedder()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.embedder.embed_documents(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self.embedder.embed_query(text)]


def as_embedder(embeddings: Any = None) -> Embedder:
    """What ingest and load_index embed with: None = the `embeddings` setting (SELFCRAG_EMBEDDINGS, default local);
    `LocalEmbeddings` = the local model itself (so its indexes load with the default settings); another LangChain
    `Embeddings` = wrapped (`LangChainEmbedder`); anything else is taken to be an Embedder already."""
    if embeddings is None:
        return embedder_for(Context.from_env().embeddings)
    if isinstance(embeddings, LocalEmbeddings):
        return embeddings.embedder
    if isinstance(embeddings, Embeddings):
        return LangChainEmbedder(embeddings)
    if not callable(getattr(embeddings, "embed_documents", None)):
        raise TypeError(f"embeddings must be a LangChain Embeddings or an Embedder, not {type(embeddings).__name__}")
    return embeddings  # type: ignore[no-any-return]


def load_index(index_dir: str | Path, embeddings: Any = None) -> HybridIndex:
    """The index in `index_dir` (built by `selfcrag ingest` or `selfcrag.ingest`; a directory, or the
    postgresql:// URL of a knowledge base in PostgreSQL + pgvector), read with the embeddings that built it
    (`embeddings` as for `as_embedder`). The same object the graph uses in this process."""
    return open_index(index_dir, as_embedder(embeddings))
