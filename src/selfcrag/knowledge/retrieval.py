"""The knowledge base: index chunks (documents.py reads and cuts them) and retrieve with FAISS + BM25 fused.

Vectors find paraphrases ("money back" -> refunds); BM25 finds exact words and identifiers (`E1042`,
`user_123`) that a small embedding model blurs. `HybridIndex` fuses both, gates out chunks unrelated to
the query and persists to a directory that `open_index` loads once per process. Nothing heavy happens at
import time: faiss and the embedding model load on first use.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from selfcrag.context import Context
from selfcrag.contract import Embedder, Passage
from selfcrag.errors import DamagedFile, IngestError
from selfcrag.knowledge import index_files, vector_index
from selfcrag.knowledge.atomic_dir import reading, recover_directory, replace_directory
from selfcrag.knowledge.documents import Chunk
from selfcrag.knowledge.embeddings import (
    query_vector,  # the graders read it from the same cache
    reads,
)
from selfcrag.knowledge.keywords import Keywords
from selfcrag.knowledge.metadata_filter import MetadataFilter, RowsByValue
from selfcrag.knowledge.vector_store import TextVectors, embed_index
from selfcrag.knowledge.vector_store import key as text_key
from selfcrag.text.text import TOKENIZER, keyword_tokens

if TYPE_CHECKING:
    from langchain_core.retrievers import BaseRetriever


# 2: the keyword index is keywords/ (keywords.py; changed: issue 46). An index of format 1 (bm25.npz or bm25.json)
# opens after `selfcrag reindex` (reindex.py) rebuilds it from chunks.jsonl.
FORMAT_VERSION = 2
DOC_HASHES = "documents.json"  # each document's content hash, for `ingest --append` (ingest.py)
CANDIDATES_PER_K = 4  # each retriever proposes 4*k chunks; fusion picks k from their union
# A query token with a digit and a letter, or an underscore: an error code, a user id, a version.
_IDENTIFIER = re.compile(r"_|(?=.*\d)(?=.*[a-z])")


# --- the hybrid index -------------------------------------------------------------------------------


REINDEXED = (1,)  # formats `selfcrag reindex` brings to FORMAT_VERSION


def scratch_keywords(documents: list[list[str]]) -> Keywords:
    """The keyword index of a new HybridIndex, in a temporary directory that goes with it (save copies it into the
    index's directory)."""
    scratch = Path(tempfile.mkdtemp(prefix="selfcrag-keywords-"))
    keywords = Keywords.build(documents, scratch / index_files.KEYWORD_DIR)
    weakref.finalize(keywords, shutil.rmtree, scratch, ignore_errors=True)  # mapped files outlive the unlink
    return keywords


def index_text(chunk: Chunk) -> str:
    """What both retrievers see: the title too, since a chunk from the middle of a document often never
    names its topic ("Refunds" / "Yuan dynasty") while questions do."""
    title = chunk.title.replace("_", " ")  # "Yuan_dynasty" (a SQuAD title) should read as two words
    return chunk.text if title.lower() in chunk.text[:200].lower() else f"{title}\n{chunk.text}"


def embedder_label(embedder: Embedder) -> str:
    """The name an index records for the embedder that built it (and that must read it)."""
    return str(getattr(embedder, "name", type(embedder).__name__))


def _mismatch(directory: str | Path, what: str, built: object, current: object, why: str) -> IngestError:
    return IngestError(f"index at {directory} was built with {what} {built!r} but the current {what} is {current!r} "
                       f"({why}); rebuild it with `selfcrag ingest PATH --index {directory}`, or switch back")


def require_index(directory: str | Path) -> Path:
    """The directory of a complete saved index at `directory` (a save killed midway is recovered first); an
    IngestError naming how to build one when there is none."""
    path = Path(directory).expanduser()
    # A save killed between its two renames leaves the old index beside a missing directory: put it back.
    found = recover_directory(path, index_files.complete)
    if found is None:
        raise _no_index(directory)
    with reading(found):  # not while a concurrent save has it renamed away between its two renames
        if not index_files.complete(found):
            raise _no_index(directory)
    return found


def _no_index(directory: str | Path) -> IngestError:
    return IngestError(f"no index at {directory}; build one with `selfcrag ingest PATH --index {directory}`")


# --- fusion, the gate and deduplication: the same for every backend (pg_index.py too) ------------------


def fused_scores(candidates: list[int], cosines: list[float], keyword: list[float], semantic: set[int],
                 lexical: set[int], tokens: list[str], holds: Callable[[str, int], bool],
                 settings: Context) -> list[tuple[float, int]]:
    """(fused score, row) of each candidate that passes the gate. `holds(term, row)`: the chunk holds the term."""
    best_bm25 = max(keyword, default=0.0)
    identifiers = [t for t in dict.fromkeys(tokens) if _IDENTIFIER.search(t)]
    scored: list[tuple[float, int]] = []
    for row, cosine, keyword_score in zip(candidates, cosines, keyword, strict=True):
        # Quality gate. A small embedding model sees "E1042" as a few meaningless word pieces, so the
        # passage defining it can score low on cosine; an exact identifier match is stronger evidence
        # than any similarity, so it passes the gate. Plain word overlap does not: BM25 always has a
        # "best" match, even for an off-topic query.
        if cosine < settings.min_similarity and not any(holds(t, row) for t in identifiers):
            continue
        # Raw cosine (clipped), not min-max. Both ranked the same on the SQuAD dev sample (gold paragraph
        # in the top 5 for 96 vs 97 of 100 questions, MRR 0.84 vs 0.85), but min-max stretches the best
        # candidate to 1 even when every candidate is off-topic, so the fused score stops saying how good
        # the match is (top score 1.07 for answerable and unanswerable questions alike; raw: 0.85 vs 0.82).
        v = min(max(cosine, 0.0), 1.0)
        b = keyword_score / best_bm25 if best_bm25 > 0 else 0.0
        both = row in semantic and row in lexical
        fused = settings.vector_weight * v + settings.keyword_weight * b + (settings.agreement_bonus if both else 0)
        scored.append((fused, row))
    return scored


def keyword_scored(tokens: list[str], bm25: dict[int, float], lexical: set[int],
                   holds: Callable[[str, int], bool], settings: Context) -> list[tuple[float, int]]:
    """Scores for a query in a language the embedder cannot read (Chinese for MiniLM, whose vocabulary has
    244 Chinese characters: most Chinese text embeds as [UNK]). Its cosine is noise — fused with it, recall@1
    on the Chinese sample fell below BM25 alone (0.96 -> 0.95 with character pairs, 0.95 -> 0.89 with single
    characters; benchmarks/chinese_tokenisation.py) — so the share of the query's terms found in the chunk
    stands in for the cosine, in the gate (none found: unrelated) and in the fusion."""
    wanted = set(tokens)
    best = max((bm25[row] for row in lexical), default=0.0)
    scored = []
    for row in lexical:  # the postings know which terms a chunk holds: no need to tokenise it again
        share = sum(holds(t, row) for t in wanted) / max(len(wanted), 1)
        if share > 0 and best > 0:
            scored.append((settings.vector_weight * share + settings.keyword_weight * bm25[row] / best, row))
    return scored


def top_passages(scored: list[tuple[float, int]], chunk_of: Callable[[int], Chunk], settings: Context,
                 ranks: dict[str, dict[int, int]] | None = None) -> list[Passage]:
    """The k best chunks, best first, without repeating a chunk or the same text; with each retriever's rank
    of the chunk when `ranks` has it."""
    passages: list[Passage] = []
    seen: set[str] = set()
    for fused, row in sorted(scored, key=lambda item: (-item[0], item[1])):
        chunk = chunk_of(row)
        text_key = " ".join(chunk.text.lower().split())
        if chunk.id in seen or text_key in seen:  # the same chunk, or the same text in two documents
            continue
        seen.update((chunk.id, text_key))
        passage = chunk.to_passage(round(min(max(fused, 0.0), 1.0), 4))
        for key, rank in (ranks or {}).items():
            if row in rank:
                passage[key] = rank[row]  # type: ignore[literal-required]
        passages.append(passage)
        if len(passages) == settings.k:
            break
    return passages


class HybridIndex:
    """FAISS (cosine over normalised vectors) + BM25, fused per query. Implements `Retriever`."""

    FILTERS_METADATA = True  # retrieve, nearest, knows and titles take a metadata filter (scoped.py)

    def __init__(self, chunks: list[Chunk], vectors: Any, bm25: Keywords, embedder: Embedder,
                 created: str = "") -> None:
        self.chunks = chunks
        self.embedder = embedder
        self.created = created or datetime.now(UTC).isoformat(timespec="seconds")
        self._vectors = vectors  # faiss.IndexFlatIP or IndexHNSWFlat (vector_index.py)
        self._bm25 = bm25
        self.text_vectors: TextVectors | None = None  # the graders' vectors of its texts (vector_store)
        self.doc_hashes: dict[str, str] = {}  # doc id -> content hash, when ingest() built it (ingest.py)
        self._rows: dict[str, int] | None = None  # search text -> row, for stored_vectors
        self._by_value: RowsByValue | None = None  # built at the first filtered search

    def attach(self, store: TextVectors | None) -> HybridIndex:
        """Keep `store` with this index: the offline components of a run searching this index read it."""
        self.text_vectors = store
        return self

    def __len__(self) -> int:
        return len(self.chunks)

    @property
    def documents(self) -> int:
        return len({c.doc_id for c in self.chunks})

    def knows(self, token: str, where: MetadataFilter | None = None) -> bool:
        """Whether any chunk (matching `where`) has this keyword token (contract.Vocabulary: can the index cover a
        question?)."""
        return self._bm25.knows(token, None if where is None else self.rows_matching(where))

    def titles(self, limit: int, where: MetadataFilter | None = None) -> list[str]:
        """The first `limit` documents' titles (of those matching `where`), in index order, each once: what a direct
        reply says the index covers (contract.Vocabulary)."""
        found: dict[str, None] = {}
        rows = range(len(self.chunks)) if where is None else self.rows_matching(where).tolist()
        for row in rows:
            if len(found) >= limit:
                break
            if self.chunks[row].title:
                found[self.chunks[row].title] = None
        return list(found)

    def rows_matching(self, where: MetadataFilter) -> np.ndarray:
        """The rows whose document's metadata matches `where`, ascending (int64), from a map built once."""
        if self._by_value is None:
            self._by_value = RowsByValue([chunk.metadata for chunk in self.chunks])
        return self._by_value.rows(where)

    @classmethod
    def build(
        cls, chunks: list[Chunk], embedder: Embedder, on_progress: Callable[[int, int], None] | None = None,
        text_vectors: bool = True, vector_kind: str | None = None,
    ) -> HybridIndex:
        """`text_vectors`: also embed what the offline components compare (sentences, strips) and keep it with the
        index, so questions embed only themselves (vector_store). `on_progress(done, total)` counts chunks.
        `vector_kind`: auto, flat or hnsw (vector_index.py); default the operator's `vector_index` setting."""
        import faiss

        if not chunks:
            raise IngestError("nothing to index: the documents produced no text")
        texts = [index_text(c) for c in chunks]
        passages = [c.text for c in chunks] if text_vectors else []
        vectors, store = embed_index(embedder, texts, passages, on_progress)
        faiss.normalize_L2(vectors)  # the protocol promises unit vectors; a foreign embedder may not deliver
        if vector_kind is None:
            vector_kind = Context.from_env().vector_index
        searched = vector_index.build(vectors, vector_index.chosen(vector_kind, len(chunks)))
        return cls(list(chunks), searched, scratch_keywords([keyword_tokens(t) for t in texts]), embedder).attach(store)

    def retrieve(self, query: str, settings: Context, where: MetadataFilter | None = None) -> list[Passage]:
        """The `settings.k` best chunks for `query`; with `where`, among the chunks whose metadata matches it only
        (the candidates of both searches are those rows: k results whenever k chunks match)."""
        if not query or not query.strip() or not self.chunks:
            return []
        allowed = None if where is None else self.rows_matching(where)
        if allowed is not None and not len(allowed):
            return []
        depth = min(len(self.chunks) if allowed is None else len(allowed), CANDIDATES_PER_K * settings.k)
        tokens = keyword_tokens(query)
        # pruned: does not score every chunk of a large index; filtered: scores the allowed rows only
        ranked = self._bm25.top(tokens, depth) if allowed is None else self._bm25.top_among(tokens, allowed, depth)
        lexical = {row for row, _ in ranked}
        if not reads(self.embedder, query):
            return self._top(self._keyword_scored(tokens, dict(ranked), lexical, settings), settings)

        qvec = np.array(query_vector(self.embedder, query), dtype=np.float32).reshape(1, -1)
        if qvec.shape[1] != self._vectors.d:
            raise IngestError(f"the embeddings give {qvec.shape[1]}-dimensional vectors but the index holds "
                              f"{self._vectors.d}-dimensional ones; rebuild the index with these embeddings")
        qvec /= max(float(np.linalg.norm(qvec)), 1e-12)
        found = [int(r) for r in vector_index.search(self._vectors, qvec, depth, allowed) if r >= 0]
        semantic = set(found)
        candidates = sorted(semantic | lexical)
        # Exact cosine for every candidate, also those only BM25 proposed: the gate needs it for all.
        cosines = self._vectors.reconstruct_batch(np.asarray(candidates, dtype=np.int64)) @ qvec[0]
        keyword = self._bm25.score_rows(tokens, candidates).tolist()
        holds = self._bm25.contains
        scored = fused_scores(candidates, cosines.tolist(), keyword, semantic, lexical, tokens, holds, settings)
        # Each retriever's rank of the chunk, best first: agreement between them is a calibration signal.
        ranks = {"vector_rank": {row: i for i, row in enumerate(found)},
                 "keyword_rank": {row: i for i, (row, _) in enumerate(ranked)}}
        return self._top(scored, settings, ranks)

    def nearest(self, vector: Any, k: int,
                where: MetadataFilter | None = None) -> list[tuple[Chunk, float, np.ndarray]]:
        """The `k` chunks (matching `where`) whose search vectors are nearest `vector`, best first, with their cosine
        and (unit) search vector: the vector half of `retrieve` alone, without keywords or the gate (the VectorStore
        face, langchain_store.py). Exact on a flat index; on HNSW (from 250,000 chunks) the graph walk `retrieve`
        uses."""
        allowed = None if where is None else self.rows_matching(where)
        if not self.chunks or k < 1 or (allowed is not None and not len(allowed)):
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        if query.shape[1] != self._vectors.d:
            raise IngestError(f"a {query.shape[1]}-dimensional query vector for an index of "
                              f"{self._vectors.d}-dimensional ones")
        query /= max(float(np.linalg.norm(query)), 1e-12)
        rows = [int(r) for r in vector_index.search(self._vectors, query, min(k, len(self.chunks)), allowed)
                if r >= 0]
        vectors = self._vectors.reconstruct_batch(np.asarray(rows, dtype=np.int64))
        return [(self.chunks[row], float(v @ query[0]), v) for row, v in zip(rows, vectors, strict=True)]

    def chunks_of(self, doc_ids: list[str]) -> list[Chunk]:
        """The chunks of these documents, in index order (a document's in its order)."""
        wanted = set(doc_ids)
        return [chunk for chunk in self.chunks if chunk.doc_id in wanted]

    def _keyword_scored(
        self, tokens: list[str], bm25: dict[int, float], lexical: set[int], settings: Context
    ) -> list[tuple[float, int]]:
        return keyword_scored(tokens, bm25, lexical, self._bm25.contains, settings)

    def _top(self, scored: list[tuple[float, int]], settings: Context,
             ranks: dict[str, dict[int, int]] | None = None) -> list[Passage]:
        return top_passages(scored, self.chunks.__getitem__, settings, ranks)

    # --- persistence --------------------------------------------------------------------------------

    def manifest(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "embedder": embedder_label(self.embedder),
            "tokenizer": TOKENIZER,
            "dim": int(self._vectors.d),
            "vector_index": vector_index.kind_of(self._vectors),
            "chunks": len(self.chunks),
            "documents": self.documents,
            "created": self.created,
        }

    def save(self, directory: str | Path) -> None:
        """Write the index to `directory` all at once: readers (and a later load after a crash, Ctrl-C or a
        full disk halfway) find the complete old index or the complete new one (`atomic_dir`)."""
        path = Path(directory).expanduser()
        _check_replaceable(path)
        # "metadata" only where there is some: an index of files is written as before it existed.
        chunks = ({k: v for k, v in asdict(chunk).items() if k != "metadata" or v} for chunk in self.chunks)

        def write(tmp: Path) -> None:
            index_files.write_files(tmp, self._vectors, chunks, self._bm25.directory, self.manifest())
            TextVectors.write(tmp, self.text_vectors)  # the stored text vectors, when this index has them
            if self.doc_hashes:
                (tmp / DOC_HASHES).write_text(json.dumps({"documents": self.doc_hashes}, ensure_ascii=False))

        replace_directory(path, write)

    @classmethod
    def load(cls, directory: str | Path, embedder: Embedder) -> HybridIndex:
        """The index saved in `directory`, every file checked first (one-line IngestError if not)."""
        path = require_index(directory)
        with reading(path):  # a concurrent save swaps its index in after we have read all four files
            if not index_files.complete(path):  # a save killed halfway since _require_index looked
                raise _no_index(directory)
            return cls._read(path, directory, embedder)

    @classmethod
    def _read(cls, path: Path, directory: str | Path, embedder: Embedder) -> HybridIndex:
        rebuild = f"rebuild it with `selfcrag ingest PATH --index {directory}`"
        reindex = f"rebuild its keyword index with `selfcrag reindex {directory}` (nothing is embedded again)"
        try:
            manifest = index_files.read_manifest(path)
            if manifest["format_version"] in REINDEXED:
                raise IngestError(f"index at {directory} was saved by an older selfcrag (keywords in "
                                  f"{index_files.KEYWORDS}); {reindex}")
            if manifest["format_version"] != FORMAT_VERSION:
                raise IngestError(f"index at {directory} has format {manifest['format_version']!r}, "
                                  f"this selfcrag reads {FORMAT_VERSION}; {rebuild}")
            if manifest["embedder"] != embedder_label(embedder):
                raise _mismatch(directory, "embedder", manifest["embedder"], embedder_label(embedder),
                                "vectors of two embedding models are not comparable")
            # Indexes from before the tokenizer was recorded cut Chinese into single characters.
            if manifest.get("tokenizer", "words/1") != TOKENIZER:
                raise IngestError(f"index at {directory} was built with keyword tokenizer "
                                  f"{manifest.get('tokenizer', 'words/1')!r} but the current one is {TOKENIZER!r} "
                                  f"(its keywords would not match the queries'); {reindex}")
            count = manifest["chunks"]
            vectors = index_files.read_vectors(path, manifest["dim"], count, manifest.get("vector_index", "flat"))
            chunks = [Chunk(**record) for record in index_files.read_chunks(path, count)]
            try:
                bm25 = Keywords.open(path / index_files.KEYWORD_DIR, count)
            except DamagedFile as exc:  # derived from chunks.jsonl: rebuilt without embedding anything
                raise IngestError(f"index at {directory} has a damaged keyword index: {_one_line(exc)}; "
                                  f"{reindex}") from None
        except IngestError:
            raise
        except DamagedFile as exc:
            raise IngestError(f"index at {directory} is damaged: {_one_line(exc)}; {rebuild}") from None
        except Exception as exc:  # an unreadable file, or faiss refusing what passed the checks
            raise IngestError(f"index at {directory} is damaged ({type(exc).__name__}: {_one_line(exc)}); "
                              f"{rebuild}") from None
        index = cls(chunks, vectors, bm25, embedder, created=str(manifest.get("created", "")))
        return index.attach(TextVectors.load(path, embedder, int(vectors.d)))

    def stored_vectors(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Vectors this index already holds for some of `texts`: the stored text vectors (as embedded), else its
        own search vectors of its chunks (normalised, as `build` would make them). What an append reuses."""
        store = self.text_vectors
        found = {t: v for t in texts if store is not None and (v := store.get(text_key(t))) is not None}
        if self._rows is None:  # once: an append asks slice by slice
            self._rows = {index_text(chunk): row for row, chunk in enumerate(self.chunks)}
        for text in texts:
            if text not in found and text in self._rows:
                found[text] = self._vectors.reconstruct(self._rows[text])
        return found

    def as_retriever(self, k: int = 4, settings: Context | None = None,
                     search_kwargs: dict[str, Any] | None = None) -> BaseRetriever:
        """This index as a LangChain `BaseRetriever` of `k` Documents (metadata: the document's own, with id, doc_id,
        chunk_index, title, source, score); `settings` (default: the environment's) set the fusion weights and the
        gate; `search_kwargs` `k` and `filter` (a metadata filter, metadata_filter.py), as LangChain's retrievers."""
        # Lazily, for start-up time: langchain_core loads only when a LangChain caller asks for a retriever.
        from selfcrag.knowledge.langchain_retriever import IndexRetriever

        return IndexRetriever.of(self, k, settings, search_kwargs)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]  # faiss's messages span lines and name its C++ source files


def _check_replaceable(path: Path) -> None:
    """A save replaces the whole directory, so it must hold an index (or nothing): `--index docs/` by
    mistake must not swap the user's documents away."""
    if path.is_file():
        raise IngestError(f"{path} is a file; an index needs a directory of its own")
    known = (*index_files.KNOWN, *TextVectors.FILES, DOC_HASHES)
    try:
        foreign = sorted(entry.name for entry in path.iterdir() if entry.name not in known)
    except FileNotFoundError:  # nothing there, or a concurrent save has it renamed away for an instant
        return
    if foreign:
        raise IngestError(f"{path} holds files that are not an index's ({', '.join(foreign[:3])}"
                          f"{', ...' if len(foreign) > 3 else ''}); saving replaces the whole directory, "
                          f"so choose a new or empty one")


# --- any LangChain retriever ------------------------------------------------------------------------


class LangChainRetriever:
    """A LangChain `BaseRetriever` (a vector store's `.as_retriever()`, a hosted search) as our Retriever."""

    def __init__(self, retriever: BaseRetriever) -> None:
        self.retriever = retriever

    def retrieve(self, query: str, settings: Context) -> list[Passage]:
        if not query or not query.strip():
            return []
        passages: list[Passage] = []
        texts: dict[str, str] = {}
        for rank, doc in enumerate(self.retriever.invoke(query)):
            meta = dict(doc.metadata or {})
            doc_id = str(meta.get("doc_id") or meta.get("id") or meta.get("source") or getattr(doc, "id", None)
                         or f"result-{rank}")
            explicit = isinstance(meta.get("chunk_index"), int)
            index = meta["chunk_index"] if explicit else 0
            pid = f"{doc_id}#{index}"
            if pid in texts and (explicit or texts[pid] == doc.page_content):
                continue  # the same chunk twice
            while pid in texts:  # different chunks of one source without chunk indexes: keep both
                index += 1
                pid = f"{doc_id}#{index}"
            texts[pid] = doc.page_content
            raw = meta.get("score", meta.get("relevance_score"))
            score = float(raw) if isinstance(raw, int | float) else 1.0 / (1.0 + rank)
            passages.append(Passage(
                id=pid, doc_id=doc_id, chunk_index=index, title=str(meta.get("title") or doc_id),
                source=str(meta.get("source") or doc_id), text=doc.page_content,
                score=round(min(max(score, 0.0), 1.0), 4), origin="kb",
            ))
            if len(passages) == settings.k:
                break
        return passages
