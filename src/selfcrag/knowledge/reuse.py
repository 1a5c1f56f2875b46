"""What an ingest reuses of the index it extends: `content_hash`, whether a document changed, and `Reusing`, the
embedder that answers every text the old index holds a vector for from there. Both back ends' ingests use them
(ingestion.py for a directory, pg_ingest.py for PostgreSQL) (changed: out of ingestion.py, which imports
pg_ingest.py, so pg_ingest.py no longer imports it back).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from selfcrag.contract import Embedder
from selfcrag.knowledge.documents import SourceDocument

if TYPE_CHECKING:
    from selfcrag.knowledge.retrieval import HybridIndex


def content_hash(doc: SourceDocument) -> str:
    """Everything of a document that its chunks carry: a change to any of it is a changed document. (Metadata only
    when there is some, so documents without it keep the hashes they had before it was kept.)"""
    carried = [doc.title, doc.source, doc.text, *([doc.metadata] if doc.metadata else [])]
    return hashlib.sha256(json.dumps(carried).encode("utf-8", "surrogatepass")).hexdigest()


class Reusing:
    """The embedder, answering every text the old index already holds a vector for from there (vectors of the
    same model for the same text: the same numbers), and counting what it embedded and reused."""

    def __init__(self, embedder: Embedder, old: HybridIndex | None) -> None:
        self.embedder = embedder
        self.old = old
        name = getattr(embedder, "name", None)  # stored text vectors go under the model's name ("": none, as without)
        self.name: str = name if isinstance(name, str) else ""
        self.embedded = self.reused = 0
        if callable(getattr(embedder, "embed_in_context", None)):  # a model that reads in context: keep doing so
            self.embed_in_context = self._in_context

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        known = self.old.stored_vectors(texts) if self.old is not None else {}
        todo = list(dict.fromkeys(t for t in texts if t not in known))
        if todo:
            fresh = np.asarray(self.embedder.embed_documents(todo), dtype=np.float32)
            known.update(zip(todo, fresh, strict=True))
        self.embedded += len(todo)
        self.reused += len(texts) - len(todo)
        return np.stack([np.asarray(known[t], dtype=np.float32) for t in texts]) if texts else np.zeros((0, 0))

    def embed_query(self, text: str) -> Any:
        return self.embedder.embed_query(text)

    def _in_context(self, inputs: list[str], parts: list[list[tuple[str, int]]]) -> Iterator[
            tuple[list[int], np.ndarray, list[list[np.ndarray | None]]]]:
        """The model's `embed_in_context`, run only for chunks the old index does not know whole (their text and
        every part stored); a known text keeps its old vector even in a chunk that is run again."""
        wanted = list(dict.fromkeys([*inputs, *(text for row in parts for text, _ in row)]))
        known = self.old.stored_vectors(wanted) if self.old is not None else {}
        todo: list[int] = []
        for row, text in enumerate(inputs):
            if text in known and all(part in known for part, _ in parts[row]):
                self.reused += 1 + len(parts[row])
                yield [row], known[text][None, :], [[known[part] for part, _ in parts[row]]]
            else:
                todo.append(row)
        if not todo:
            return
        run = self.embedder.embed_in_context  # type: ignore[attr-defined]
        for rows, vectors, spans in run([inputs[i] for i in todo], [parts[i] for i in todo]):
            rows = [todo[n] for n in rows]
            for n, row in enumerate(rows):
                if inputs[row] in known:
                    vectors[n] = known[inputs[row]]
                for p, (part, _) in enumerate(parts[row]):
                    if part in known:
                        spans[n][p] = known[part]
                    self.embedded += spans[n][p] is not None and part not in known
                    self.reused += part in known
                self.embedded += inputs[row] not in known
                self.reused += inputs[row] in known
            yield rows, vectors, spans
