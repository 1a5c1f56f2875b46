"""The knowledge base in PostgreSQL + pgvector: what every replica of a deployment reads, and any host ingests into.

The same chunks, the same fusion, gate and deduplication as the directory index (retrieval.py), but the engine
does the searching, so nothing is loaded into the process and a query costs the engine's index lookups:
- vectors in a pgvector column with an HNSW index (inner product over unit vectors = cosine); below the operator's
  `exact_search_below` chunks the search is exact (a sequential scan, as a flat FAISS index would be);
- keywords as postings (term, chunk, tf, chunk length) with per-term document frequencies and corpus totals, so
  Okapi BM25 (the same k1, b, Lucene idf and length normalisation as bm25.py) is computed from the heads of the
  query terms' posting lists, read in order of impact (pg_keywords.py; PostgreSQL's own ts_rank_cd has no idf: it
  found the target chunk for 7 of 200 keyword queries where BM25 found 69);
- the offline graders' stored evidence vectors (vector_store.py) in a table keyed by text hash.

A metadata filter (metadata_filter.py) is a condition on the chunks' JSONB metadata in the WHERE clause of both
searches (a GIN index serves it; pg_schema.FILTERABLE): the vector search walks the HNSW index with pgvector's
iterative scan, and compares the matching chunks exactly when that finds too few; the keyword search ranks the
matching chunks' postings. So k results come back whenever k chunks match.

One retrieval reads one snapshot (REPEATABLE READ), so it never sees a document half replaced; ingest
(pg_ingest.py) writes a batch of documents per transaction. The schema (pg_schema.py) is created and migrated
under an advisory lock and its version recorded. Connections come from one bounded pool per URL and process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from selfcrag.contract import Embedder, Passage
from selfcrag.errors import IngestError
from selfcrag.home import describe
from selfcrag.knowledge import pg_keywords, pg_schema
from selfcrag.knowledge.documents import Chunk
from selfcrag.knowledge.embeddings import (
    query_vector,  # the graders read it from the same cache
    reads,
)
from selfcrag.knowledge.metadata_filter import MetadataFilter
from selfcrag.knowledge.pg_schema import CONNECT_SECONDS, check_meta, connected, needs_extra, unreachable
from selfcrag.knowledge.retrieval import (
    CANDIDATES_PER_K,
    embedder_label,
    fused_scores,
    keyword_scored,
    top_passages,
)
from selfcrag.knowledge.vector_store import embedder_name
from selfcrag.knowledge.vector_store import key as text_key
from selfcrag.store.pg_pool import fail_fast_pool
from selfcrag.text.text import keyword_tokens

if TYPE_CHECKING:
    from langchain_core.retrievers import BaseRetriever

    from selfcrag.context import Context

POOL_SIZE = 8  # connections per process and URL


# `+ 0` keeps the planner off the HNSW index: an exact top-n over every vector.
_VECTOR_EXACT = "SELECT row FROM selfcrag_kb_chunks ORDER BY (embedding <#> %(q)s) + 0, row LIMIT %(n)s"
_VECTOR_HNSW = "SELECT row FROM selfcrag_kb_chunks ORDER BY embedding <#> %(q)s LIMIT %(n)s"


def search_depth(conn: Any, settings: Context, depth: int) -> None:
    """This transaction's HNSW searches: the operator's ef_search (at least `depth`: pgvector returns no more rows
    than it keeps), and no sequential scan, so stale planner statistics cannot turn one exact."""
    conn.execute(f"SET LOCAL hnsw.ef_search = {max(settings.pg_hnsw_ef_search, depth)}; "
                 "SET LOCAL enable_seqscan = off")


def _vector_top(conn: Any, query: np.ndarray, n: int, size: int, settings: Context,
                where: MetadataFilter | None = None) -> list[int]:
    """Rows of the `n` chunks (matching `where`) nearest the unit `query`, best first: exact below
    `exact_search_below` chunks (or with `vector_index` flat), else the HNSW index, whatever the planner's statistics
    (stale after a bulk ingest). Filtered, the HNSW walk goes on past rows the filter excludes (pgvector's iterative
    scan, in order); when it still finds fewer than `n`, the matching rows are compared exactly."""
    exact = settings.vector_index == "flat" or (settings.vector_index == "auto" and size < settings.exact_search_below)
    if where is None:
        if not exact:  # the HNSW index, whatever the planner's statistics (stale after a bulk ingest)
            search_depth(conn, settings, n)
        found = [int(r) for (r,) in conn.execute(_VECTOR_EXACT if exact else _VECTOR_HNSW, {"q": query, "n": n})]
        conn.execute("SET LOCAL enable_seqscan = on")
        return found
    condition, conditions = where.sql("meta")
    params: dict[str, Any] = {**conditions, "q": query, "n": n}
    found = []
    if not exact:
        search_depth(conn, settings, n)
        conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        found = [int(r) for (r,) in conn.execute(f"SELECT row FROM selfcrag_kb_chunks WHERE {condition} "
                                                 "ORDER BY embedding <#> %(q)s LIMIT %(n)s", params)]
        conn.execute("SET LOCAL enable_seqscan = on; SET LOCAL hnsw.iterative_scan = off")
    if exact or len(found) < n:
        found = [int(r) for (r,) in conn.execute(f"SELECT row FROM selfcrag_kb_chunks WHERE {condition} "
                                                 "ORDER BY (embedding <#> %(q)s) + 0, row LIMIT %(n)s", params)]
    return found


_CHUNK_COLUMNS = "doc_id, chunk_index, title, source, text, metadata"  # a Chunk, as `_chunk` reads it


def _chunk(record: Iterable[Any]) -> Chunk:
    doc_id, index, title, source, text, metadata = record
    return Chunk(f"{doc_id}#{index}", doc_id, index, title, source, text, metadata)


_pools: dict[str, Any] = {}
_pools_lock = threading.Lock()


def pool(url: str) -> Any:
    """The process's bounded pool for `url` (PgIndex.snapshot replaces connections the server dropped, so the run
    after an outage works)."""
    try:
        from pgvector.psycopg import register_vector
    except ImportError:
        raise needs_extra() from None
    with _pools_lock:
        if url not in _pools:
            _pools[url] = fail_fast_pool(url, min_size=1, max_size=POOL_SIZE, timeout=CONNECT_SECONDS, open=True,
                                         kwargs={"autocommit": True, "connect_timeout": CONNECT_SECONDS},
                                         configure=register_vector)
        return _pools[url]


def close_pools() -> None:
    with _pools_lock:
        for opened in _pools.values():
            opened.close()
        _pools.clear()


class PgIndex:
    """A knowledge base in PostgreSQL. Implements `Retriever` and `Vocabulary`, and offers what the directory index
    offers the graders (`text_vectors`) and an append (`stored_vectors`)."""

    FILTERS_METADATA = True  # retrieve, nearest, knows and titles take a metadata filter (scoped.py)

    def __init__(self, url: str, embedder: Embedder) -> None:
        self.url = url
        self.embedder = embedder
        self.text_vectors = StoredTextVectors(self)
        self._filterable = False  # the schema has the chunks' JSONB metadata (checked at the first filter)

    def _filtered(self, where: MetadataFilter | None) -> MetadataFilter | None:
        """`where`, once the knowledge base can take it: one built before metadata filters is migrated first."""
        if where is not None and not self._filterable:
            pg_schema.upgrade(self.url)
            self._filterable = True
        return where

    @classmethod
    def open(cls, url: str, embedder: Embedder) -> PgIndex:
        """The knowledge base at `url`, checked (one-line IngestError when there is none or it does not fit)."""
        with connected(url) as conn:
            if not conn.execute("SELECT to_regclass('selfcrag_kb_meta') IS NOT NULL").fetchone()[0]:
                raise IngestError(f"no knowledge base at {describe(url)}; build one with "
                                  f"`selfcrag ingest PATH --index {describe(url)}`")
            check_meta(conn, url, embedder)
        return cls(url, embedder)

    @contextmanager
    def snapshot(self) -> Iterator[Any]:
        """A connection in one read-only REPEATABLE READ transaction: every statement sees the same documents."""
        import psycopg
        from psycopg_pool import PoolTimeout

        opened = pool(self.url)
        try:
            for attempt in range(2):
                with opened.connection() as conn:
                    try:
                        conn.execute("SELECT 1")
                    except psycopg.OperationalError:
                        if attempt:
                            raise
                        # The server dropped the pool's connections (a restart, a failover): replace them all at
                        # once, rather than meeting them one run at a time.
                        opened.check()
                        continue
                    with conn.transaction():
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                        yield conn
                    return
        except (psycopg.Error, PoolTimeout) as exc:
            raise unreachable(self.url, exc) from None

    def __len__(self) -> int:
        with self.snapshot() as conn:
            return int(conn.execute("SELECT chunks FROM selfcrag_kb_stats").fetchone()[0])

    @property
    def documents(self) -> int:
        with self.snapshot() as conn:
            return int(conn.execute("SELECT count(*) FROM selfcrag_kb_documents").fetchone()[0])

    def knows(self, token: str, where: MetadataFilter | None = None) -> bool:
        """Whether any chunk (matching `where`) has this keyword token: one primary-key lookup in the terms table (a
        term leaves it when its last posting does, pg_ingest._remove); filtered, the term's postings of matching
        chunks."""
        where = self._filtered(where)
        with self.snapshot() as conn:
            if where is None:
                return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM selfcrag_kb_terms WHERE term = %s)",
                                         (token,)).fetchone()[0])
            condition, params = where.sql("c.meta")
            return bool(conn.execute(
                "SELECT EXISTS (SELECT 1 FROM selfcrag_kb_postings p JOIN selfcrag_kb_chunks c ON c.row = p.chunk "
                f"WHERE p.term = %(term)s AND {condition})", params | {"term": token}).fetchone()[0])

    def titles(self, limit: int, where: MetadataFilter | None = None) -> list[str]:
        """The first `limit` documents' titles (of those matching `where`) in ingest order, each once (a replaced
        document's chunks are new rows: it moves to the end). A server-side cursor over the chunks' primary key,
        read until `limit` are found: the cost grows with `limit`, not with the knowledge base."""
        found: dict[str, None] = {}
        where = self._filtered(where)
        condition, params = where.sql("meta") if where is not None else ("TRUE", {})
        with self.snapshot() as conn, conn.cursor(name="selfcrag_titles") as cursor:
            cursor.execute("SELECT title FROM selfcrag_kb_chunks WHERE chunk_index = 0 AND title <> '' "
                           f"AND {condition} ORDER BY row", params)
            for (title,) in cursor:
                if len(found) >= limit:
                    break
                found[title] = None
        return list(found)

    def retrieve(self, query: str, settings: Context, where: MetadataFilter | None = None) -> list[Passage]:
        """The `settings.k` best chunks for `query`; with `where`, among the chunks whose metadata matches it only
        (a condition of both searches: k results whenever k chunks match)."""
        if not query or not query.strip():
            return []
        where = self._filtered(where)
        tokens = keyword_tokens(query)
        terms = list(dict.fromkeys(tokens))
        qvec = None
        if reads(self.embedder, query):
            qvec = np.array(query_vector(self.embedder, query), dtype=np.float32)
            qvec /= max(float(np.linalg.norm(qvec)), 1e-12)
        with self.snapshot() as conn:
            scorer = pg_keywords.Scorer(conn, terms)
            size = scorer.chunks
            depth = min(size, CANDIDATES_PER_K * settings.k)
            if depth == 0:
                return []
            weights: dict[int, dict[str, float]] = {}  # the keyword search's lookups serve the candidates too
            ranked = (pg_keywords.top(conn, scorer, depth, weights) if where is None
                      else pg_keywords.top_among(conn, scorer, depth, weights, where))
            found = _vector_top(conn, qvec, depth, size, settings, where) if qvec is not None else []
            lexical = {row for row, _ in ranked}
            candidates = sorted(set(found) | lexical)
            chunks, cosines = self._candidates(conn, candidates, qvec)
            scorer.look_up(conn, [row for row in candidates if row not in weights], weights)

        def holds(term: str, row: int) -> bool:
            return term in weights[row]

        if qvec is None:
            return top_passages(keyword_scored(tokens, dict(ranked), lexical, holds, settings), chunks.__getitem__,
                                settings)
        # Each row's weights summed in query-term order from 0.0, as bm25.py sums them.
        keyword = [sum(weights[row].get(t, 0.0) for t in terms) for row in candidates]
        scored = fused_scores(candidates, [cosines[row] for row in candidates], keyword, set(found), lexical,
                              tokens, holds, settings)
        ranks = {"vector_rank": {row: i for i, row in enumerate(found)},
                 "keyword_rank": {row: i for i, (row, _) in enumerate(ranked)}}
        return top_passages(scored, chunks.__getitem__, settings, ranks)

    @staticmethod
    def _candidates(conn: Any, rows: list[int], qvec: np.ndarray | None) -> tuple[dict[int, Chunk],
                                                                                    dict[int, float]]:
        """The candidates' chunks and their exact cosine with the query (the gate needs it for all of them)."""
        cosine = "-(embedding <#> %(q)s)" if qvec is not None else "0.0"
        chunks: dict[int, Chunk] = {}
        cosines: dict[int, float] = {}
        for row, doc_id, index, title, source, text, value in conn.execute(
                f"SELECT row, doc_id, chunk_index, title, source, text, {cosine} FROM selfcrag_kb_chunks "
                "WHERE row = ANY(%(rows)s)", {"rows": rows, "q": qvec}):
            chunks[row] = Chunk(f"{doc_id}#{index}", doc_id, index, title, source, text)
            cosines[row] = float(value)
        return chunks, cosines

    def nearest(self, vector: Any, k: int, settings: Context | None = None,
                where: MetadataFilter | None = None) -> list[tuple[Chunk, float, np.ndarray]]:
        """The `k` chunks (matching `where`) whose search vectors are nearest `vector`, best first, with their cosine
        and (unit) search vector: the vector half of `retrieve` alone (exact below `exact_search_below` chunks, else
        the HNSW index), for the VectorStore face (langchain_store.py). Chunks carry their document's metadata."""
        from selfcrag.context import Context

        settings = settings or Context.from_env()
        where = self._filtered(where)
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        query /= max(float(np.linalg.norm(query)), 1e-12)
        with self.snapshot() as conn:
            size = int(conn.execute("SELECT chunks FROM selfcrag_kb_stats").fetchone()[0])
            rows = _vector_top(conn, query, min(k, size), size, settings, where) if k > 0 and size else []
            found = {row: (chunk, cosine, stored) for row, *chunk, cosine, stored in conn.execute(
                f"SELECT row, {_CHUNK_COLUMNS}, -(embedding <#> %(q)s), embedding FROM selfcrag_kb_chunks "
                "WHERE row = ANY(%(rows)s)", {"rows": rows, "q": query})}
        return [(_chunk(found[row][0]), float(found[row][1]), np.asarray(found[row][2].to_numpy(), dtype=np.float32))
                for row in rows]

    def chunks_of(self, doc_ids: list[str]) -> list[Chunk]:
        """The chunks of these documents, in ingest order (a document's in its order), with their metadata."""
        with self.snapshot() as conn:
            return [_chunk(record) for record in conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM selfcrag_kb_chunks WHERE doc_id = ANY(%s) ORDER BY row",
                (list(doc_ids),))]

    def stored_vectors(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Vectors the knowledge base holds for some of `texts`: stored text vectors, else chunk search vectors
        (what an append reuses, as HybridIndex.stored_vectors)."""
        keys = {text_key(t): t for t in texts}
        found: dict[str, np.ndarray] = {}
        with self.snapshot() as conn:
            for table, column in (("selfcrag_kb_text_vectors", "key"), ("selfcrag_kb_chunks", "search_key")):
                wanted = [k for k, t in keys.items() if t not in found]
                for hashed, vector in conn.execute(f"SELECT {column}, embedding FROM {table} "
                                                   f"WHERE {column} = ANY(%s)", (wanted,)):
                    found.setdefault(keys[bytes(hashed)], np.asarray(vector.to_numpy(), dtype=np.float32))
        return found

    def as_retriever(self, k: int = 4, settings: Context | None = None,
                     search_kwargs: dict[str, Any] | None = None) -> BaseRetriever:
        """This knowledge base as a LangChain `BaseRetriever` of `k` Documents, as HybridIndex.as_retriever (with
        `search_kwargs` `k` and `filter`)."""
        # Lazily, for start-up time: langchain_core loads only when a LangChain caller asks for a retriever.
        from selfcrag.knowledge.langchain_retriever import IndexRetriever

        return IndexRetriever.of(self, k, settings, search_kwargs)  # type: ignore[arg-type]


class StoredTextVectors:
    """The graders' stored vectors of a PostgreSQL knowledge base: `lookup` as vector_store.TextVectors'."""

    def __init__(self, index: PgIndex) -> None:
        self.index = index
        self.embedder = embedder_label(index.embedder)

    def lookup(self, embedder: Embedder, texts: Iterable[str]) -> dict[str, np.ndarray]:
        if embedder_name(embedder) != self.embedder:
            return {}
        keys = {text_key(t): t for t in dict.fromkeys(texts)}
        if not keys:
            return {}
        with self.index.snapshot() as conn:
            rows = conn.execute("SELECT key, embedding FROM selfcrag_kb_text_vectors WHERE key = ANY(%s)",
                                (list(keys),)).fetchall()
        return {keys[bytes(hashed)]: np.asarray(vector.to_numpy(), dtype=np.float32) for hashed, vector in rows}


_opened: dict[tuple[str, str], PgIndex] = {}


def open_pg(url: str, embedder: Embedder) -> PgIndex:
    """The knowledge base at `url` for `embedder`, checked once per process: it holds no data, so documents another
    process ingests later are searched at once."""
    label = (url, embedder_label(embedder))
    if label not in _opened:
        _opened[label] = PgIndex.open(url, embedder)
    return _opened[label]
