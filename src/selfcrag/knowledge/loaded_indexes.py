"""The indexes a process has loaded: an index directory once (again when it is rebuilt), and the bundled sample,
built on first use and kept in the user's cache. A run asks for its index at every retrieval and every offline
component call, so the answer must be cheap; a server's concurrent first requests load an index once.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from selfcrag.contract import Embedder, Retriever
from selfcrag.errors import IngestError
from selfcrag.home import cache_dir, is_postgres
from selfcrag.knowledge import index_files
from selfcrag.knowledge.documents import SourceDocument, chunk_documents, load_documents
from selfcrag.knowledge.embeddings import default_embedder
from selfcrag.knowledge.retrieval import HybridIndex, embedder_label, require_index
from selfcrag.knowledge.vector_store import FORMAT as TEXT_VECTORS
from selfcrag.text.text import TOKENIZER

if TYPE_CHECKING:
    from selfcrag.context import Context

_cache: dict[tuple[str, ...], HybridIndex] = {}
_cache_lock = threading.Lock()


def _embedder_or_default(embedder: Embedder | None) -> Embedder:
    if embedder is not None:
        return embedder
    return default_embedder()


def _cached(key: tuple[str, ...], make: Callable[[], HybridIndex]) -> HybridIndex:
    # A dict rather than functools.lru_cache: the key must be the embedder's *name* (the CLI's default
    # embedder and the graph's lazy wrapper are different objects for the same model), and the lock makes
    # concurrent first requests on a server load the index once.
    with _cache_lock:
        if key not in _cache:
            _cache[key] = make()
        return _cache[key]


# (index_dir as given, embedder name) -> the manifest stamp and index `open_index` last returned for them
_opened: dict[tuple[str, str], tuple[str, HybridIndex]] = {}


def _stamp(manifest: Path) -> str:
    info = manifest.stat()  # a rebuilt index has a new manifest file
    return f"{info.st_ino}:{info.st_mtime_ns}"


def open_index(index_dir: str | Path, embedder: Embedder | None = None) -> HybridIndex:
    """The index in `index_dir`, loaded once per process (reloaded if it was rebuilt since); a postgresql:// URL is
    a knowledge base in PostgreSQL (pg_index.py), opened once per process and read at every query."""
    if is_postgres(str(index_dir)):
        from selfcrag.knowledge.pg_index import open_pg  # lazily, for start-up: PostgreSQL's side loads when used

        return open_pg(str(index_dir), _embedder_or_default(embedder))  # type: ignore[return-value]
    if embedder is not None:
        # A run asks for its index at every retrieval and every offline component call (its stored vectors, ~9
        # times a question): while the manifest is the same file, it is the index returned last, and the checks
        # below (~0.1 ms CPU: a killed save to recover, a half-written index) have nothing new to find.
        seen = _opened.get((str(index_dir), embedder_label(embedder)))
        with contextlib.suppress(OSError):
            if seen is not None and _stamp(Path(index_dir).expanduser() / index_files.MANIFEST) == seen[0]:
                return seen[1]
    path = require_index(index_dir).resolve()  # before loading a model: a typo should fail fast
    embedder = _embedder_or_default(embedder)
    stamp = _stamp(path / index_files.MANIFEST)
    index = _cached((str(path), stamp, embedder_label(embedder)), lambda: HybridIndex.load(index_dir, embedder))
    _opened[(str(index_dir), embedder_label(embedder))] = (stamp, index)
    return index


def _sample_cache_dir(documents: list[SourceDocument], embedder: Embedder) -> Path:
    """Where the built sample index is kept between runs: keyed by its text and embedder, so an edited
    sample or another model never loads a stale index. `SELFCRAG_CACHE_DIR` moves it."""
    digest = hashlib.sha256(f"{embedder_label(embedder)}\0{TOKENIZER}\0{TEXT_VECTORS}".encode())  # rebuilt with them
    for doc in documents:
        digest.update(f"{doc.doc_id}\0{doc.title}\0{doc.text}\0".encode())
    return cache_dir() / f"sample-{digest.hexdigest()[:16]}"


def sample_index(embedder: Embedder | None = None) -> HybridIndex:
    """The bundled sample knowledge base (selfcrag/data/sample_kb): built on first use, then loaded from the
    user's cache (seconds saved on every CLI call); built in memory when the cache cannot be written."""
    embedder = _embedder_or_default(embedder)

    def build() -> HybridIndex:
        with resources.as_file(resources.files("selfcrag") / "data" / "sample_kb") as folder:
            documents = load_documents([folder])
        cache = _sample_cache_dir(documents, embedder)
        try:
            return HybridIndex.load(cache, embedder)
        except (IngestError, OSError):
            pass  # not built yet, or damaged: built below
        index = HybridIndex.build(chunk_documents(documents), embedder)
        # Two first runs at once each save whole and the last swap wins (the same index twice).
        with contextlib.suppress(OSError, IngestError):  # read-only home: the index in memory still works
            index.save(cache)
        return index

    return _cached(("<sample>", embedder_label(embedder)), build)


def index_for(settings: Context, embedder: Embedder | None = None) -> Retriever:
    """The run's knowledge base: `settings.index_dir` if set, else the bundled sample."""
    return open_index(settings.index_dir, embedder) if settings.index_dir else sample_index(embedder)
