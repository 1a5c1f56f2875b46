"""Vectors of an index's evidence texts, computed once at ingest and served at question time.

The offline graders, the refiner, the extractive generator and the groundedness checker compare the question
with each passage, each sentence and each knowledge strip. Embedding those for every question was 97% of an
offline question's CPU; they depend only on the index, so `HybridIndex.build` embeds them once
(`evidence_texts`), `save` writes them beside the index and `load` reads them back. `embeddings.embed()`
asks the store of the index the run searches first (`TextVectors.lookup`) and embeds only what it lacks: the
question, its rewrites, web results.

One mechanism, keyed by the exact text (a 128-bit hash of it): any component asking for a known text gets the
stored vector, whatever it does with it. A store serves only an embedder of the name that computed it, the same
name an index's manifest records, so vectors of another model never meet. An embedder without a name gets no
stored vectors. With the local model, a chunk's text has the vector the model gives it alone; its sentences and
strips are pooled from the chunk's one pass (late chunking, `in_context`), so they are read in context and differ
from the vectors of the same sentences embedded alone (which a question's own new texts still get).

Because of that, one sentence has a different stored vector in each index that holds it (another chunk around it),
and a run reads only the store of the index it searches (`backend.IndexEmbedder`), never another loaded index's:
what a run decides does not depend on what else its process has loaded.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from selfcrag.context import Context
from selfcrag.contract import Embedder
from selfcrag.text import cuts
from selfcrag.text.text import split_sentences

VECTORS_FILE, KEYS_FILE = "text_vectors.npy", "text_keys.npy"  # beside the index's own files
FORMAT = "text-vectors/2"  # part of the sample and eval indexes' cache keys: a cached one from before is rebuilt once
# (2: sentences and strips pooled from their chunk's pass, `in_context`; 1: each embedded alone)
KEY_BYTES = 16
# Chunks whose texts an ingest embeds together. A slice's texts (~8 per chunk with sentences and strips) are sorted
# by length among themselves, which at this size pads as little as sorting the whole corpus, and only they and their
# token ids are held while they are embedded: an ingest's working memory does not grow with the corpus.
INGEST_SLICE = 4096
GENERIC_CALL = 64  # texts per embed_documents call for an embedder that does not cut its own calls
PROGRESS_TEXTS = 64  # embedded texts between two progress reports

log = logging.getLogger(__name__)


def key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=KEY_BYTES).digest()


def embedder_name(embedder: object) -> str | None:
    name = getattr(embedder, "name", None)
    return name if isinstance(name, str) and name else None


class TextVectors:
    """Stored vectors of texts (row i of `vectors` belongs to the text whose key is row i of `keys`)."""

    FILES = (VECTORS_FILE, KEYS_FILE)  # what it adds to an index directory

    def __init__(self, embedder: str, keys: np.ndarray, vectors: np.ndarray) -> None:
        if keys.shape != (len(vectors), KEY_BYTES) or vectors.ndim != 2:
            raise ValueError(f"{len(keys)} keys for {len(vectors)} vectors")
        self.embedder = embedder
        self.keys = keys
        self.vectors = vectors
        raw = keys.tobytes()
        self._rows = {raw[i * KEY_BYTES : (i + 1) * KEY_BYTES]: i for i in range(len(keys))}

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @classmethod
    def of(cls, embedder: str, texts: list[str], vectors: np.ndarray) -> TextVectors:
        keys = np.frombuffer(b"".join(key(t) for t in texts), dtype=np.uint8).reshape(len(texts), KEY_BYTES)
        return cls(embedder, keys, np.ascontiguousarray(vectors, dtype=np.float32))

    def get(self, hashed: bytes) -> np.ndarray | None:
        row = self._rows.get(hashed)
        return None if row is None else self.vectors[row]

    def lookup(self, embedder: Embedder, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those `texts` this store holds, if `embedder` is the model that computed them."""
        found: dict[str, np.ndarray] = {}
        if embedder_name(embedder) != self.embedder:
            return found
        for text in dict.fromkeys(texts):
            vector = self.get(key(text))
            if vector is not None:
                found[text] = vector
        return found

    @staticmethod
    def write(directory: Path, store: TextVectors | None) -> None:
        """Write `store` into an index directory; None removes an earlier index's, which must not outlive it."""
        for name in (KEYS_FILE, VECTORS_FILE):
            (directory / name).unlink(missing_ok=True)
        if store is None:
            return
        # Keys last: a save that dies halfway leaves no keys, and `load` skips vectors without them.
        _write(directory / VECTORS_FILE, np.asarray(store.vectors))
        _write(directory / KEYS_FILE, store.keys)

    @classmethod
    def load(cls, directory: Path, embedder: Embedder, dim: int) -> TextVectors | None:
        """The stored vectors in `directory` (of an index that `embedder` may read), or None when there are none
        (an index from before them, or one saved without them) or they cannot be used. They only save time, so a
        damaged pair is skipped with a warning: the index still answers, embedding what it would have found here."""
        name = embedder_name(embedder)
        if not name or not (directory / VECTORS_FILE).is_file() or not (directory / KEYS_FILE).is_file():
            return None
        try:
            # Memory-mapped: pages of a large store are read when a question needs them, not at load.
            vectors = np.load(directory / VECTORS_FILE, mmap_mode="r", allow_pickle=False)
            keys = np.load(directory / KEYS_FILE, allow_pickle=False)
            if vectors.dtype != np.float32 or keys.dtype != np.uint8 or vectors.ndim != 2 or vectors.shape[1] != dim:
                raise ValueError(f"expected float32 vectors of size {dim} and byte keys, found "
                                 f"{vectors.dtype} {vectors.shape} and {keys.dtype} {keys.shape}")
            return cls(name, keys, vectors)
        except (OSError, ValueError) as exc:
            log.warning("ignoring the stored text vectors in %s (%s); questions will embed them", directory, exc)
            return None


def _write(path: Path, array: np.ndarray) -> None:
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with staging.open("wb") as out:
        np.save(out, array, allow_pickle=False)
    os.replace(staging, path)


# --- what an index stores --------------------------------------------------------------------------------


def evidence_texts(passage_texts: Iterable[str], strip_sentences: int | None = None) -> list[str]:
    """Every text the offline components embed for passages with these texts, once each: the passage (relevance
    grader), its sentences (relevance grader, refiner), its strips at `strip_sentences` (default: the setting's
    default) and their sentences as the extractive generator and the groundedness checker cut them."""
    size = strip_sentences or Context().strip_sentences
    out: dict[str, None] = {}
    for text in passage_texts:
        out.update(dict.fromkeys(cuts.passage_texts(text)))
        for strip, _ in cuts.strips_of(text, size):
            out[strip] = None
            out.update(dict.fromkeys(cuts.clean(s) for s in split_sentences(strip)))  # the generator's candidates
            out.update(dict.fromkeys(cuts.evidence_sentences(strip)))  # the groundedness checker's evidence
    out.pop("", None)
    return list(out)


def embedding_calls(embedder: Embedder, texts: list[str]) -> Iterator[tuple[list[int], np.ndarray]]:
    """The vectors of `texts` as the embedder computes them, call after call: (row numbers, their vectors). An
    embedder with its own `embed_batches` cuts its calls (the local model by padded tokens, a remote one into
    concurrent requests); any other gets groups of GENERIC_CALL texts, shortest first."""
    own = getattr(embedder, "embed_batches", None)
    if callable(own):
        yield from own(texts)
        return
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), GENERIC_CALL):
        rows = order[start : start + GENERIC_CALL]
        yield rows, np.asarray(embedder.embed_documents([texts[i] for i in rows]), dtype=np.float32)


def embed_index(
    embedder: Embedder, indexed: list[str], passages: list[str],
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, TextVectors | None]:
    """Vectors of an index's `indexed` texts (what its vector search compares: title and text), and a store of
    those and of the `evidence_texts` of its `passages` (none without passages or an embedder name).

    An embedder that reads texts in context (`embed_in_context`, the local model) runs each chunk once and pools its
    token states over each sentence and strip (`in_context`); the rest, and everything for another embedder, is
    embedded alone. Streamed: INGEST_SLICE chunks at a time, so working memory is one slice's, whatever the corpus.
    A text in two chunks (overlapping chunks repeat sentences) is stored once, from the first chunk that holds it
    whole. `on_progress(chunks done, chunks in all)` follows the embedding calls."""
    name = embedder_name(embedder)
    storing = bool(name and passages)
    contextual = getattr(embedder, "embed_in_context", None) if storing else None
    out: np.ndarray | None = None
    seen: set[bytes] = set()
    keys: list[np.ndarray] = []
    vectors: list[np.ndarray] = []
    for start in range(0, len(indexed), INGEST_SLICE):
        own = indexed[start : start + INGEST_SLICE]

        def progress(done: int, total: int, start: int = start, size: int = len(own)) -> None:
            if on_progress:
                on_progress(start + size * done // max(total, 1), len(indexed))

        found: dict[str, np.ndarray] = {}
        evidence: list[str] = []
        if storing:
            slice_passages = passages[start : start + INGEST_SLICE]
            if callable(contextual):
                found = in_context(contextual, own, slice_passages, seen, progress)
            evidence = evidence_texts(slice_passages)
        wanted = set(own)  # a chunk needs its vector even when an earlier slice stored it
        alone = [t for t in dict.fromkeys([*own, *evidence]) if t not in found and (t in wanted or key(t) not in seen)]
        got = np.zeros((0, 0), dtype=np.float32)
        done = reported = 0
        for rows, batch in embedding_calls(embedder, alone):
            if got.shape[1] != batch.shape[1]:
                got = np.zeros((len(alone), batch.shape[1]), dtype=np.float32)
            got[rows] = batch
            done += len(rows)
            if not callable(contextual) and (done - reported >= PROGRESS_TEXTS or done == len(alone)):
                reported = done  # (after the chunks' passes, which report the slice, the texts embedded alone are
                progress(done, len(alone))  # few: the tails of chunks past the model's cut)
        found.update(zip(alone, got, strict=True))
        if not found:
            continue
        if out is None:
            out = np.zeros((len(indexed), len(next(iter(found.values())))), dtype=np.float32)
        out[start : start + len(own)] = np.stack([found[t] for t in own])
        if storing:
            new = [t for t in found if key(t) not in seen]
            hashed = [key(t) for t in new]
            seen.update(hashed)
            keys.append(np.frombuffer(b"".join(hashed), dtype=np.uint8).reshape(len(new), KEY_BYTES))
            vectors.append(np.stack([found[t] for t in new]) if new else np.zeros((0, out.shape[1]), np.float32))
    if out is None:  # nothing to embed
        return np.zeros((0, 0), dtype=np.float32), None
    # The store keeps the vectors exactly as embedded, as a question would get them; the index normalises its own
    # copy in place.
    store = TextVectors(name, np.concatenate(keys), np.concatenate(vectors)) if storing and name else None
    return out, store


InContext = Callable[
    [list[str], list[list[tuple[str, int]]]], Iterable[tuple[list[int], np.ndarray, list[list[np.ndarray | None]]]]
]


def in_context(embed: InContext, indexed: list[str], passages: list[str], seen: set[bytes],
               on_progress: Callable[[int, int], None]) -> dict[str, np.ndarray]:
    """Vectors of chunks' `indexed` texts and of their passages' evidence texts, one model pass per chunk (late
    chunking: `embed_in_context`). A text the store holds already (`seen`) is left out. A text in two chunks gets
    the vector of the first one, in index order, whose pass covers it; a text no pass covers (cut off by the
    model's truncation, or not a span of its passage) is missing from the result, for the caller to embed alone."""
    inputs = list(dict.fromkeys(indexed))
    parts: list[list[tuple[str, int]]] = [[] for _ in inputs]
    row_of = {text: row for row, text in enumerate(inputs)}
    for text, passage in zip(indexed, passages, strict=True):
        row = row_of[text]
        if parts[row] or (offset := text.find(passage)) < 0:  # a repeated chunk, or a passage not in its text
            continue
        for part in evidence_texts([passage]):
            if part != text and key(part) not in seen and (at := passage.find(part)) >= 0:
                parts[row].append((part, offset + at))
    own: list[np.ndarray | None] = [None] * len(inputs)
    pooled: list[list[np.ndarray | None]] = [[] for _ in inputs]
    done = 0
    for rows, vectors, spans in embed(inputs, parts):
        for row, vector, row_parts in zip(rows, vectors, spans, strict=True):
            own[row], pooled[row] = vector, row_parts
        done += len(rows)
        on_progress(done, len(inputs))
    # A whole chunk's text keeps its own vector (its search vector, as a question would embed it); any other text
    # takes the vector of the first chunk, in index order, that holds it.
    found = {text: vector for text, vector in zip(inputs, own, strict=True) if vector is not None}
    for row in range(len(inputs)):
        for (part, _), span in zip(parts[row], pooled[row], strict=True):
            if span is not None:
                found.setdefault(part, span)
    return found
