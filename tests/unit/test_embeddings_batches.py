"""How ingest cuts its embedding work: calls sorted by token length and bounded by padded tokens, deduplicated texts,
slices of chunks streamed into the index and its store, and remote requests run a bounded number at a time."""

from __future__ import annotations

import threading
import zlib

import numpy as np
import pytest

from selfcrag.errors import EmbeddingModelError
from selfcrag.knowledge import vector_store
from selfcrag.knowledge.documents import SourceDocument, chunk_documents
from selfcrag.knowledge.embeddings import LangChainEmbedder, default_embedder
from selfcrag.knowledge.minilm import BATCH_SIZE, TOKEN_BUDGET, session_threads, token_batches
from selfcrag.knowledge.retrieval import HybridIndex, index_text
from selfcrag.text.text import keyword_tokens


def test_batches_sort_by_length_and_respect_the_padded_budget_and_the_row_cap() -> None:
    lengths = [30, 5, 200, 7, 31, 300, 6, 120, 8, 9]
    batches = token_batches(lengths, budget=64, max_rows=3)
    assert sorted(row for batch in batches for row in batch) == list(range(len(lengths)))
    flat = [lengths[row] for batch in batches for row in batch]
    assert flat == sorted(lengths)  # one sort over all texts, shortest first
    for batch in batches:
        longest = max(lengths[row] for row in batch)
        assert len(batch) <= 3
        assert len(batch) * longest <= 64 or len(batch) == 1  # a text over the budget goes alone
    assert [lengths[row] for row in batches[0]] == [5, 6, 7]
    assert token_batches([], 64) == []
    assert [len(b) for b in token_batches([10] * 10, budget=35)] == [3, 3, 3, 1]  # no row cap: the budget cuts


def test_session_threads_default_to_the_cpus_this_process_may_use() -> None:
    import os

    assert session_threads(3) == 3
    assert 1 <= session_threads() <= min(4, len(os.sched_getaffinity(0)))


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


def test_local_calls_stay_within_the_budget_and_embed_each_distinct_text_once(embedder) -> None:
    texts = ["Short.", "A somewhat longer sentence about the Yuan dynasty and its capital.", "Short.",
             " ".join(["Kublai Khan founded the Yuan dynasty in 1271."] * 30), "", "Another one.", "Short."]
    seen: list[list[int]] = []
    calls: list[tuple[int, int]] = []
    run = embedder._run

    def recording(rows: list[np.ndarray]) -> np.ndarray:
        calls.append((len(rows), max(len(r) for r in rows)))
        return run(rows)

    embedder._run = recording
    try:
        out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
        for rows, vectors in embedder.embed_batches(texts):
            seen.append(rows)
            out[rows] = vectors
    finally:
        del embedder._run
    assert sorted(row for rows in seen for row in rows) == list(range(len(texts)))
    assert sum(n for n, _ in calls) == len(set(texts))  # "Short." three times, embedded once
    assert all(n <= BATCH_SIZE and (n * width <= TOKEN_BUDGET or n == 1) for n, width in calls)
    assert np.array_equal(out[0], out[2]) and np.array_equal(out[0], out[6])
    # A text's vector does not depend on the company it is embedded in.
    for row, text in enumerate(texts):
        np.testing.assert_allclose(out[row], embedder.embed_documents([text])[0], rtol=0, atol=1e-5)


class Bow:
    """Hashed bag of words (unit vectors) that counts what it embeds."""

    name, dim = "test/bow-batches", 64

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in keyword_tokens(text):
                out[row, zlib.crc32(token.encode()) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def _chunks():
    # Two documents repeat the same sentences, so the store must not hold (or embed) them twice.
    shared = "The depot opens at nine. Parcels wait there for two weeks."
    docs = [SourceDocument(f"d{i}", f"Doc {i}", "x.md", f"Document {i} is about topic {i}. {shared}") for i in range(7)]
    return chunk_documents(docs)


def test_streamed_slices_give_the_index_and_store_of_one_pass(monkeypatch) -> None:
    chunks = _chunks()
    whole_embedder = Bow()
    whole = HybridIndex.build(chunks, whole_embedder)
    monkeypatch.setattr(vector_store, "INGEST_SLICE", 3)
    progress: list[tuple[int, int]] = []
    sliced_embedder = Bow()
    sliced = HybridIndex.build(chunks, sliced_embedder, on_progress=lambda d, t: progress.append((d, t)))
    assert whole.text_vectors is not None and sliced.text_vectors is not None
    assert len(sliced.text_vectors) == len(whole.text_vectors) == len(sliced.text_vectors.keys)  # no repeats
    for hashed in whole.text_vectors.keys:
        assert np.array_equal(whole.text_vectors.get(hashed.tobytes()), sliced.text_vectors.get(hashed.tobytes()))
    rows = np.arange(len(chunks), dtype=np.int64)
    assert np.array_equal(whole._vectors.reconstruct_batch(rows), sliced._vectors.reconstruct_batch(rows))
    # Each distinct text embedded once, however the chunks were sliced: overlapping chunks repeat sentences.
    assert sliced_embedder.texts.count("The depot opens at nine.") == 1
    assert progress[-1] == (len(chunks), len(chunks))
    assert [d for d, _ in progress] == sorted(d for d, _ in progress)
    assert {index_text(c) for c in chunks} <= set(sliced_embedder.texts)


class Remote:
    """A LangChain-style Embeddings that holds each request until `width` requests are in flight together."""

    def __init__(self, width: int, fail_on: str = "") -> None:
        self.barrier = threading.Barrier(width, timeout=30)  # a bound, not a measurement: no concurrency = failure
        self.fail_on = fail_on
        self.active = self.most = 0
        self.requests: list[list[str]] = []
        self.lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self.lock:
            self.requests.append(list(texts))
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            if self.fail_on in texts:
                raise ConnectionError("connection reset by peer")
            self.barrier.wait()
            return [[float(len(t)), 1.0] for t in texts]
        finally:
            with self.lock:
                self.active -= 1

    def embed_query(self, text: str) -> list[float]:
        return [float(len(text)), 1.0]


def test_remote_requests_run_concurrently_bounded_and_in_order() -> None:
    texts = [f"text {'x' * i}" for i in range(4 * 64)]  # four full requests
    remote = Remote(width=2)
    embedder = LangChainEmbedder(remote, name="remote", concurrency=2)
    vectors = embedder.embed_documents(texts)
    assert len(remote.requests) == 4 and all(len(r) == 64 for r in remote.requests)
    assert remote.most == 2  # two at once (the barrier needed both), never more
    expected = np.array([[len(t), 1.0] for t in texts], dtype=np.float32)
    np.testing.assert_allclose(vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True), rtol=1e-6)


def test_a_failing_remote_request_is_one_error_and_stops_the_rest() -> None:
    texts = [f"t{i}" for i in range(10 * 64)]
    remote = Remote(width=1, fail_on="t0")
    embedder = LangChainEmbedder(remote, name="remote", concurrency=3)
    with pytest.raises(EmbeddingModelError, match="connection reset by peer"):
        embedder.embed_documents(texts)
    assert len(remote.requests) <= 3  # those already in flight; the other seven were never sent


# --- late chunking: one pass per chunk gives its sentences' and strips' vectors --------------------------------


def _stored(index: HybridIndex, text: str) -> np.ndarray:
    assert index.text_vectors is not None
    vector = index.text_vectors.get(vector_store.key(text))
    assert vector is not None, text
    return np.asarray(vector)


def test_a_long_chunk_gives_its_tail_sentences_vectors_of_their_own(embedder) -> None:
    sentences = [f"Station {n} of the Quellport survey recorded {n * 7} millimetres of rain in week {n}." for n in
                 range(1, 31)]  # ~20 tokens each: the chunk passes the model's 256 tokens
    (chunk,) = chunk_documents([SourceDocument("rain", "Rain", "rain.md", " ".join(sentences))], max_words=1000)
    text = index_text(chunk)
    parts = [(s, text.find(s)) for s in sentences]
    ((_, _, (pooled,)),) = list(embedder.embed_in_context([text], [parts]))
    assert pooled[0] is not None and pooled[-1] is None  # cut off by the truncation: no vector from this pass
    index = HybridIndex.build([chunk], embedder)
    np.testing.assert_allclose(_stored(index, sentences[0]), pooled[0], rtol=0, atol=1e-6)
    # The tail is embedded alone, so every sentence still has a stored vector.
    np.testing.assert_allclose(_stored(index, sentences[-1]), embedder.embed_documents([sentences[-1]])[0],
                               rtol=0, atol=1e-5)
    assert float(_stored(index, sentences[0]) @ embedder.embed_documents([sentences[0]])[0]) < 0.999  # in context


def test_a_text_in_two_chunks_is_stored_once_with_the_first_chunks_vector(embedder) -> None:
    shared = "The depot opens at nine."
    docs = [SourceDocument("a", "Tides", "a.md", f"The harbour has two high tides a day. {shared}"),
            SourceDocument("b", "Bridges", "b.md", f"Four bridges cross the river Amsel. {shared}")]
    chunks = chunk_documents(docs)
    index = HybridIndex.build(chunks, embedder)
    inputs = [index_text(c) for c in chunks]
    passes = list(embedder.embed_in_context(inputs, [[(shared, t.find(shared))] for t in inputs]))
    in_first, in_second = ({row: spans[n][0] for rows, _, spans in passes for n, row in enumerate(rows)}[i]
                           for i in (0, 1))
    assert float(in_first @ in_second) < 0.999  # its two contexts give it two vectors ...
    np.testing.assert_allclose(_stored(index, shared), in_first, rtol=0, atol=1e-6)  # ... the first one is stored
    assert index.text_vectors is not None
    assert len(index.text_vectors) == len(index.text_vectors.keys)  # stored once
    # A chunk's own text keeps the vector the model gives it alone, which is also its search vector.
    np.testing.assert_allclose(_stored(index, inputs[1]), embedder.embed_documents([inputs[1]])[0], atol=1e-5)


def test_parts_are_pooled_over_their_characters_tokens() -> None:
    from selfcrag.knowledge.minilm import span_vectors

    hidden = np.arange(12, dtype=np.float32).reshape(6, 2) + 1.0
    # [CLS] "ab" "cd" "##e" "." [SEP] over the text "ab cde." (character offsets; specials have empty spans)
    offsets = np.array([[0, 0], [0, 2], [3, 5], [5, 6], [6, 7], [0, 0]])
    first, second, past = span_vectors(hidden, offsets, [("ab", 0), ("cde.", 3), ("cde. more", 3)])
    mean = hidden[2:5].mean(axis=0)
    np.testing.assert_allclose(second, mean / np.linalg.norm(mean), rtol=1e-6)
    np.testing.assert_allclose(first, hidden[1] / np.linalg.norm(hidden[1]), rtol=1e-6)
    assert past is None  # ends past the last token: truncated
    assert span_vectors(hidden, offsets, []) == []


def test_streamed_slices_read_in_context_give_the_store_of_one_pass(embedder, monkeypatch) -> None:
    chunks = _chunks()  # seven chunks repeating two sentences
    whole = HybridIndex.build(chunks, embedder)
    monkeypatch.setattr(vector_store, "INGEST_SLICE", 3)
    progress: list[int] = []
    sliced = HybridIndex.build(chunks, embedder, on_progress=lambda done, _: progress.append(done))
    assert whole.text_vectors is not None and sliced.text_vectors is not None
    assert len(sliced.text_vectors) == len(whole.text_vectors) == len(sliced.text_vectors.keys)  # no repeats
    for hashed in whole.text_vectors.keys:  # the first chunk holding a text gives its vector, in any slice
        np.testing.assert_allclose(whole.text_vectors.get(hashed.tobytes()),
                                   sliced.text_vectors.get(hashed.tobytes()), rtol=0, atol=1e-6)
    assert progress == sorted(progress) and progress[-1] == len(chunks)
