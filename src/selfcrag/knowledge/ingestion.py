"""`selfcrag.ingest(sources, index_dir)`: documents in, a saved index out. The one way to build or extend an index:
`selfcrag ingest` and the server's indexer graph (indexer.py) call it, and the VectorStore face (langchain_store.py)
calls its write path, `write_documents`.

Sources are paths (folders, files of every type loaders.py reads, JSONL corpora) and LangChain `Document`s.
Without `append`, the index is built from the sources alone and replaces what `index_dir` held. With `append`,
the sources are added to the index: a document with a new id is added, one whose id is known but whose content
hash differs replaces the old one, and one with the same id and hash keeps its chunks; documents the sources do
not name stay. A file whose id the index holds from another source (two folders' README.md) is not a new version:
it goes in under its folder's name, or with `replace` replaces the other (clashes.py); the report names every
document replaced. Nothing already embedded is embedded again: every text whose vector the old index holds (its
search vectors and stored text vectors, vector_store.py) is answered from there, so only new and changed text
reaches the model. Either way the save is atomic (atomic_dir): a failed ingest leaves the old index whole.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from selfcrag.contract import Embedder
from selfcrag.errors import IngestError
from selfcrag.home import describe, is_postgres
from selfcrag.knowledge import index_files
from selfcrag.knowledge.atomic_dir import recover_directory, replace_directory
from selfcrag.knowledge.clashes import settle
from selfcrag.knowledge.documents import (
    Chunk,
    Skipped,
    SourceDocument,
    chunk_documents,
    read_documents,
    with_metadata,
)
from selfcrag.knowledge.langchain_objects import as_embedder
from selfcrag.knowledge.loaders import Limits
from selfcrag.knowledge.retrieval import DOC_HASHES, HybridIndex, _check_replaceable
from selfcrag.knowledge.reuse import Reusing, content_hash


@dataclass
class IngestReport:
    """What an ingest did. Document counts: `added` (new ids), `replaced` (known id, new content), `unchanged`
    (same id and content), `kept` (in the index, not in the sources; append only). Text counts: `embedded` by the
    model, `reused` from the old index."""

    index_dir: str
    append: bool = False
    documents: int = 0  # read from the sources
    chunks: int = 0  # in the saved index
    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    kept: int = 0
    removed: int = 0  # taken out (the VectorStore face's delete)
    embedded: int = 0
    reused: int = 0
    replaced_index: bool = False  # without append: index_dir held an index, now replaced
    skipped: list[Skipped] = field(default_factory=list)
    replaced_ids: list[str] = field(default_factory=list)  # the documents `replaced` counts
    clashes: list[str] = field(default_factory=list)  # one line for each id held by another source (clashes.py)
    seconds: float = 0.0

    def summary(self) -> str:
        changes = (f" ({self.added} added, {self.replaced} replaced, {self.unchanged} unchanged; {self.kept} others "
                   "kept)" if self.append else "")
        return (f"indexed {self.documents} documents{changes} as {self.chunks} chunks into {self.index_dir} in "
                f"{self.seconds:.1f}s ({self.embedded} texts embedded, {self.reused} reused)")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["skipped"] = [str(s) for s in self.skipped]
        return out


def _doc_hashes(index: HybridIndex, path: Path) -> dict[str, str]:
    """The documents' content hashes saved with the index, or {} when there are none (an index not built by
    ingest) or they do not fit it. They only spare unchanged documents a re-chunking, so a bad file costs a
    warning: its documents count as changed, and their texts are still reused by vector."""
    try:
        hashes = json.loads((path / DOC_HASHES).read_text(encoding="utf-8"))["documents"]
        if not isinstance(hashes, dict) or set(hashes) != {c.doc_id for c in index.chunks} or not all(
                isinstance(h, str) for h in hashes.values()):
            raise ValueError("its documents are not the index's")
        return hashes
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logging.getLogger(__name__).warning("ignoring %s in %s (%s)", DOC_HASHES, path, exc)
        return {}


def has_index(path: Path) -> bool:
    found = recover_directory(path, index_files.complete)  # a save killed between its renames: put the old back
    return found is not None and index_files.complete(found)


def _plan(old: HybridIndex | None, docs: list[SourceDocument], report: IngestReport,
          remove: set[str]) -> tuple[list[Chunk], dict[str, str]]:
    """The new index's chunks (old documents in their order but those in `remove`, then the new ones) and its
    document hashes."""
    hashes = {doc.doc_id: content_hash(doc) for doc in docs}
    if old is None:
        report.added = len(docs)
        return chunk_documents(docs), hashes
    incoming = {doc.doc_id: doc for doc in docs}
    by_doc: dict[str, list[Chunk]] = {}
    for chunk in old.chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk)
    chunks: list[Chunk] = []
    for doc_id, old_chunks in by_doc.items():
        doc = incoming.get(doc_id)
        if doc is None and doc_id in remove:
            report.removed += 1
        elif doc is None:
            report.kept += 1
            chunks += old_chunks
            hashes[doc_id] = old.doc_hashes.get(doc_id, "")  # none for an index built before hashes: never equal
        elif old.doc_hashes.get(doc_id) == hashes[doc_id]:
            report.unchanged += 1
            chunks += old_chunks
        else:
            report.replaced += 1
            report.replaced_ids.append(doc_id)
            chunks += chunk_documents([doc])
    added = [doc for doc in docs if doc.doc_id not in by_doc]
    report.added = len(added)
    return chunks + chunk_documents(added), hashes


_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(path: Path) -> threading.Lock:
    """One ingest at a time per index in this process: two appends at once would each start from the same old
    index, and the later save would drop the other's documents. (Across processes the last save wins, whole.)"""
    with _locks_guard:
        return _locks.setdefault(str(path.resolve()), threading.Lock())


def ingest(
    sources: str | Path | Any | Iterable[str | Path | Any],
    index_dir: str | Path,
    *,
    append: bool = False,
    replace: bool = False,
    strict: bool = False,
    embeddings: Any = None,
    on_progress: Callable[[int, int], None] | None = None,
    limits: Limits | None = None,
    metadata: dict[str, Any] | None = None,
) -> IngestReport:
    """Index `sources` (paths and/or LangChain Documents) into `index_dir`; see the module docstring for `append`
and `replace`.
    `strict`: the first bad record, unreadable or unsupported file is an IngestError instead of a skip.
    `embeddings`: None (the `embeddings` setting, default local), a LangChain `Embeddings` or an Embedder; an
    index is read with the embeddings that built it. `on_progress(done, total)` counts texts. `limits`: the size
    bounds of every read (None: the operator's `max_ingest_*` settings from the environment). `metadata`: keys every
    document read gets, over its own of the same name (`{"tenant": "acme"}` for one tenant's folder: what metadata
    filters and the `tenant` setting match).
    Bad input raises IngestError with one line; the report lists what was skipped and why."""
    from langchain_core.documents import Document

    started = time.perf_counter()
    if isinstance(sources, str | Path | Document):
        sources = [sources]
    if not is_postgres(str(index_dir)):
        _check_replaceable(Path(index_dir).expanduser())  # before any embedding: `--index docs/` by mistake fails
    embedder = as_embedder(embeddings)
    loaded = read_documents(sources, strict=strict, limits=limits)
    if metadata:
        loaded.documents = with_metadata(loaded.documents, metadata)
    where = describe(str(index_dir)) if is_postgres(str(index_dir)) else str(index_dir)
    report = IngestReport(where, append, documents=len(loaded.documents), skipped=loaded.skipped)
    write_documents(index_dir, loaded.documents, embedder, report, append=append, replace=replace,
                    on_progress=on_progress)
    report.seconds = time.perf_counter() - started
    return report


def write_documents(index_dir: str | Path, docs: list[SourceDocument], embedder: Embedder, report: IngestReport, *,
                    append: bool, replace: bool = False, remove: Iterable[str] = (),
                    on_progress: Callable[[int, int], None] | None = None) -> None:
    """The one write path of both backends, for `ingest` and the VectorStore face (langchain_store.py): write
    `docs` (read and cleaned already) into `index_dir` as `ingest` describes, and with `append` take the documents
    `remove` names out too, settling ids held by another source as `replace` says (clashes.py); fill `report`.
    A directory index is saved whole and atomically; PostgreSQL writes a batch of documents per transaction
    (pg_ingest.py). A directory left without documents holds no index."""
    if is_postgres(str(index_dir)):  # the knowledge base in PostgreSQL + pgvector (pg_ingest.py)
        from selfcrag.knowledge.pg_ingest import ingest_documents  # lazily, for start-up: loads when used

        ingest_documents(str(index_dir), docs, embedder, report, append=append, replace=replace,
                         remove=list(remove), on_progress=on_progress)
        return
    path = Path(index_dir).expanduser()
    with _lock(path):
        existed = has_index(path)
        old = HybridIndex.load(path, embedder) if append and existed else None  # a damaged one: rebuild it
        if old is not None:
            old.doc_hashes = _doc_hashes(old, path)
            # The manifest names the embedder, not its size: a model of the same name giving vectors of another
            # size would mix two sizes in one index (PostgreSQL's schema records the dimension and checks it too).
            dim, held = len(embedder.embed_query("dimensions")), old.manifest()["dim"]
            if dim != held:
                raise IngestError(f"the index at {index_dir} holds {held}-dimensional vectors but the embeddings "
                                  f"give {dim}-dimensional ones; use the embeddings that built it")
        report.replaced_index = existed and not append
        if old is not None:
            docs, report.clashes = settle(docs, {c.doc_id: c.source for c in old.chunks}, replace=replace)
        chunks, hashes = _plan(old, docs, report, set(remove))
        if not chunks and report.removed:  # the last documents removed: an empty directory, swapped in whole
            replace_directory(path, lambda tmp: None)
            return
        reusing = Reusing(embedder, old)
        # An old index saved without stored text vectors gets none now either: they would cost its whole text.
        with_texts = old is None or old.text_vectors is not None
        index = HybridIndex.build(chunks, reusing, on_progress=on_progress, text_vectors=with_texts)
        index.embedder = embedder  # the model's name goes into the manifest, not the wrapper's
        index.doc_hashes = hashes
        index.save(path)
    report.chunks, report.embedded, report.reused = len(index.chunks), reusing.embedded, reusing.reused
