"""The knowledge base as a LangChain `VectorStore`: `KnowledgeBaseVectorStore(location)`, for a directory index or a
postgresql:// knowledge base, the same location `ingest` and `load_index` take.

Two faces of one knowledge base, searching differently:
- `load_index(location).as_retriever()` is the hybrid retrieval the graph uses: vectors and BM25 keywords fused,
  deduplicated, and chunks below the similarity gate dropped (langchain_retriever.py).
- This store's `similarity_search*` is the vector search alone: the `k` chunks whose vectors are nearest the query
  (cosine, best first; exact on a flat index and below `exact_search_below` chunks in PostgreSQL), no keywords, no
  gate; `max_marginal_relevance_search` picks among those for variety. Its `as_retriever()` is LangChain's
  `VectorStoreRetriever` over these (`search_type` similarity, similarity_score_threshold or mmr).

Writes go through `ingestion.write_documents`, the one write path `ingest` uses: adding a document whose id is
known replaces it (unchanged ones are left alone), nothing already embedded is embedded again, a directory index
is saved whole and atomically (a kill -9 leaves the old index or the new), PostgreSQL writes a batch of documents
per transaction. Ids follow LangChain, not `ingest`: `ids`, else `Document.id`, else a new uuid4.

A document is what was added: its id, text and metadata (JSON, kept with every chunk and given back as it came; a
document `ingest` read from a file gets `{"title", "source"}`). The knowledge base cuts a long text into chunks;
search and `get_by_ids` answer chunks, each with its document's id and metadata. A document's search text is its
text, after its metadata `title` when it has one (as `ingest` indexes a titled document); its `source` is metadata
`source`, else its id. Text is cleaned as `ingest` cleans it (invisible characters, look-alike letters).

Every search takes `filter=` (metadata_filter.py: equality and `$in` on metadata keys), applied inside the search:
the `k` nearest among the matching chunks, not the `k` nearest with the others then dropped.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from selfcrag.errors import IngestError
from selfcrag.home import is_postgres
from selfcrag.knowledge.documents import Chunk, SourceDocument, cleaned, encoded_metadata
from selfcrag.knowledge.ingestion import IngestReport, has_index, write_documents
from selfcrag.knowledge.langchain_objects import as_embedder
from selfcrag.knowledge.loaded_indexes import open_index
from selfcrag.knowledge.loaders import Limits
from selfcrag.knowledge.metadata_filter import MetadataFilter, parse


class KnowledgeBaseVectorStore(VectorStore):
    """selfcrag's knowledge base at `location` (an index directory, or a postgresql:// URL) as a LangChain
    `VectorStore`. `embedding`: a LangChain `Embeddings` (or an Embedder); None = the `embeddings` setting (default
    the local model). An existing knowledge base built with embeddings of another name is refused here, with the
    IngestError `load_index` gives: its vectors and these would not be comparable."""

    def __init__(self, location: str | Path, embedding: Any = None) -> None:
        self.location = str(location)
        self.embedding = embedding
        self.embedder = as_embedder(embedding)
        self._pg: Any = None  # the PgIndex, once the database holds a knowledge base
        self._index()  # a knowledge base of other embeddings fails now, not at the first search

    @property
    def embeddings(self) -> Embeddings | None:
        return self.embedding if isinstance(self.embedding, Embeddings) else None

    def _index(self) -> Any:
        """The HybridIndex or PgIndex at the location, or None while it holds no knowledge base (an empty store)."""
        if is_postgres(self.location):
            if self._pg is None:
                from selfcrag.knowledge import pg_schema  # lazily, as everywhere: PostgreSQL's side loads when used

                if not pg_schema.has_knowledge_base(self.location):
                    return None
                index = open_index(self.location, self.embedder)  # checks the embedder against the database's
                pg_schema.upgrade(self.location)  # chunks' metadata came with schema version 2
                self._pg = index
            return self._pg
        return open_index(self.location, self.embedder) if has_index(Path(self.location).expanduser()) else None

    # --- writing ---------------------------------------------------------------------------------------

    def add_texts(self, texts: Iterable[str], metadatas: list[dict[str, Any]] | None = None, *,
                  ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        """Add documents, or replace those whose id the knowledge base holds; their ids, in order."""
        _no_options(kwargs, "add_texts")
        texts = list(texts)
        metadatas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        given = list(ids) if ids is not None else [None] * len(texts)
        if not len(texts) == len(metadatas) == len(given):
            raise ValueError(f"{len(texts)} texts, {len(metadatas)} metadatas and {len(given)} ids")
        out = [str(i) if i is not None and str(i) else str(uuid.uuid4()) for i in given]
        limits = Limits.from_env()
        docs: dict[str, SourceDocument] = {}  # an id given twice: the last text wins, as two calls would do
        for doc_id, text, metadata in zip(out, texts, metadatas, strict=True):
            if not isinstance(text, str) or not text.strip():
                raise IngestError(f"document {doc_id!r} has no text")
            if problem := limits.too_long(text):
                raise IngestError(f"document {doc_id!r}: {problem}")
            docs[doc_id] = cleaned(_source_document(doc_id, text, metadata or {}))
        if docs:
            self._write(list(docs.values()))
        return out

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Take these documents (all their chunks) out; ids it does not hold are no error. Every id must be named:
        None deletes nothing and is refused, as a whole knowledge base is not dropped by a missing argument."""
        _no_options(kwargs, "delete")
        if ids is None:
            raise IngestError("delete needs the ids of the documents to take out")
        index = self._index()
        wanted = [str(i) for i in ids]
        if index is not None and index.chunks_of(wanted):
            self._write([], remove=wanted)
        return True

    def _write(self, docs: list[SourceDocument], remove: list[str] | None = None) -> None:
        report = IngestReport(self.location, append=True, documents=len(docs))
        write_documents(self.location, docs, self.embedder, report, append=True, remove=remove or ())

    # --- reading ---------------------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The chunks of these documents (one for a short document), in index order; unknown ids are left out."""
        index = self._index()
        return [] if index is None else [_document(chunk) for chunk in index.chunks_of([str(i) for i in ids])]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """The `k` chunks nearest the query's vector (of those matching `filter=`), best first, with their cosine
        similarity (higher is nearer)."""
        where = _filter(kwargs, "similarity_search")
        index = self._index()
        if index is None:
            return []
        return self.similarity_search_with_score_by_vector(list(self.embedder.embed_query(query)), k, filter=where)

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score_by_vector(embedding, k, **kwargs)]

    def similarity_search_with_score_by_vector(self, embedding: list[float], k: int = 4,
                                               **kwargs: Any) -> list[tuple[Document, float]]:
        where = _filter(kwargs, "similarity_search")
        index = self._index()
        if index is None:
            return []
        return [(_document(chunk), cosine) for chunk, cosine, _ in index.nearest(embedding, k, where=where)]

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5,
                                      **kwargs: Any) -> list[Document]:
        """`k` of the `fetch_k` nearest chunks, each next one the most relevant and least like those already taken
        (`lambda_mult` 1: relevance alone, 0: difference alone): what `as_retriever(search_type="mmr")` asks."""
        where = _filter(kwargs, "max_marginal_relevance_search")
        if self._index() is None:
            return []
        return self.max_marginal_relevance_search_by_vector(list(self.embedder.embed_query(query)), k, fetch_k,
                                                            lambda_mult, filter=where)

    def max_marginal_relevance_search_by_vector(self, embedding: list[float], k: int = 4, fetch_k: int = 20,
                                                lambda_mult: float = 0.5, **kwargs: Any) -> list[Document]:
        where = _filter(kwargs, "max_marginal_relevance_search")
        index = self._index()
        found = [] if index is None else index.nearest(embedding, fetch_k, where=where)
        if not found:
            return []
        picked = maximal_marginal_relevance(np.asarray(embedding, dtype=np.float32), [v for _, _, v in found],
                                            lambda_mult=lambda_mult, k=k)
        return [_document(found[i][0]) for i in picked]

    def _select_relevance_score_fn(self) -> Any:
        """Relevance in [0, 1]: the cosine, below 0 as 0 (the hybrid retrieval's fusion clips it alike)."""
        return lambda cosine: min(max(cosine, 0.0), 1.0)

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: list[dict[str, Any]] | None = None, *,
                   ids: list[str] | None = None, **kwargs: Any) -> KnowledgeBaseVectorStore:
        """`from_texts(texts, embedding, location=DIR_OR_URL)`: the store at `location` with `texts` added."""
        location = kwargs.pop("location", None)
        if location is None:
            raise TypeError("from_texts needs location=: the index directory or postgresql:// URL to write")
        _no_options(kwargs, "from_texts")
        store = cls(location, embedding=embedding)
        store.add_texts(texts, metadatas, ids=ids)
        return store


def _no_options(kwargs: dict[str, Any], method: str) -> None:
    """An option this store does not have is an error, not silently ignored."""
    if kwargs:
        raise TypeError(f"{method}: this vector store takes no {', '.join(sorted(kwargs))}")


def _filter(kwargs: dict[str, Any], method: str) -> MetadataFilter | None:
    """A search's `filter=` (a ValueError with one line when it is not one this store applies); any other option
    is an error, as in `_no_options`."""
    options = dict(kwargs)
    raw = options.pop("filter", None)
    _no_options(options, method)
    return parse(raw)


def _source_document(doc_id: str, text: str, metadata: dict[str, Any]) -> SourceDocument:
    encoded = encoded_metadata(doc_id, metadata) or "{}"  # given back as it came: {} is not "none"
    title, source = metadata.get("title"), metadata.get("source")
    return SourceDocument(doc_id=doc_id, title=title.strip() if isinstance(title, str) else "",
                          source=source if isinstance(source, str) and source.strip() else doc_id, text=text,
                          metadata=encoded)


def _document(chunk: Chunk) -> Document:
    metadata = json.loads(chunk.metadata) if chunk.metadata else {"title": chunk.title, "source": chunk.source}
    return Document(page_content=chunk.text, metadata=metadata, id=chunk.doc_id)
