"""Loading, chunking, BM25, the hybrid index, persistence and the LangChain adapter.

Most tests use a deterministic hashed bag-of-words embedder (no model); one uses the real local
all-MiniLM-L6-v2 to show that retrieval is semantic, not just keyword matching.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from selfcrag.context import Context
from selfcrag.knowledge.bm25 import BM25
from selfcrag.knowledge.documents import (
    IngestError,
    Skipped,
    SourceDocument,
    chunk_documents,
    load_documents,
    read_documents,
)
from selfcrag.knowledge.loaded_indexes import index_for, open_index, sample_index
from selfcrag.knowledge.reindex import reindex
from selfcrag.knowledge.retrieval import HybridIndex, LangChainRetriever
from selfcrag.text.text import keyword_tokens, split_sentences


class BowEmbedder:
    """Hashed bag of stemmed words, L2-normalised: texts sharing words are similar, others orthogonal."""

    dim = 512

    def __init__(self, name: str = "test/bow") -> None:
        self.name = name

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for token in keyword_tokens(text):
            v[zlib.crc32(token.encode()) % self.dim] += 1.0
        norm = np.linalg.norm(v)
        return v / norm if norm else v

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)


KB = {
    "errors": "Error codes. E1042 means the payment was declined by the bank. E2001 means the address is invalid.",
    "accounts": "Account ids look like user_123. Support can find an account by its id and the email address.",
    "refunds": "Refunds go to the original payment method within 5 business days after the return arrives.",
    "shipping": "Standard shipping takes 3 to 5 business days. Express shipping arrives the next business day.",
    "garden": "Tomatoes need full sun and regular watering. Prune the side shoots every week.",
}


def kb_chunks(extra: dict[str, str] | None = None) -> list:
    texts = {**KB, **(extra or {})}
    return chunk_documents([SourceDocument(d, d.title(), f"{d}.md", t) for d, t in texts.items()])


@pytest.fixture
def index() -> HybridIndex:
    return HybridIndex.build(kb_chunks(), BowEmbedder())


def ctx(**overrides) -> Context:
    return Context(**{"k": 3, **overrides})


# --- loading ----------------------------------------------------------------------------------------


def test_folder_loading_recurses_titles_and_skips_what_it_cannot_read(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    (root / "sub").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "refunds.md").write_text("# Refund Policy\n\nRefunds take 5 days.", encoding="utf-8")
    (root / "sub" / "shipping_rates-2024.txt").write_text("Shipping costs 4 dollars.", encoding="utf-8")
    (root / ".git" / "notes.md").write_text("internal", encoding="utf-8")
    (root / "data.csv").write_text("a,b", encoding="utf-8")
    (root / "empty.md").write_text("   \n", encoding="utf-8")
    if importlib.util.find_spec("pypdf") is None:
        (root / "scan.pdf").write_bytes(b"%PDF-1.4 not really")  # skipped without pypdf, never a crash

    loaded = read_documents([root])
    docs = {d.doc_id: d for d in loaded.documents}
    assert set(docs) == {"refunds", "sub/shipping_rates-2024"}
    # A file with nothing to index is said, one line each (a CSV of a header only has no rows).
    assert {str(s) for s in loaded.skipped} >= {f"{root / 'data.csv'}: no text to index",
                                                 f"{root / 'empty.md'}: no text to index"}
    assert docs["refunds"].title == "Refund Policy"
    assert docs["sub/shipping_rates-2024"].title == "shipping rates 2024"
    assert docs["sub/shipping_rates-2024"].source == "kb/sub/shipping_rates-2024.txt"


def test_single_files_and_input_errors(tmp_path: Path) -> None:
    note = tmp_path / "my-note.txt"
    note.write_text("Plain text without a heading.", encoding="utf-8")
    (doc,) = load_documents([str(note)])
    assert (doc.doc_id, doc.title, doc.source) == ("my-note", "my note", "my-note.txt")

    with pytest.raises(IngestError, match="nope.md: no such file or directory"):
        load_documents([tmp_path / "nope.md"])
    (tmp_path / "slides.key").write_text("x", encoding="utf-8")
    with pytest.raises(IngestError, match="unsupported file type"):
        load_documents([tmp_path / "slides.key"])
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(IngestError, match=r"latin1\.txt: not UTF-8 text \(byte 3; it reads as Latin-1/Windows-1252: "
                       r"save it as UTF-8, e\.g\. iconv -f cp1252 -t utf-8\)$"):
        load_documents([tmp_path / "latin1.txt"])
    (tmp_path / "binary.txt").write_bytes(b"ab\x81\x8d")  # bytes Windows-1252 leaves undefined: no such hint
    with pytest.raises(IngestError, match=r"binary\.txt: not UTF-8 text \(byte 2\)$"):
        load_documents([tmp_path / "binary.txt"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(IngestError, match="no documents found"):
        load_documents([tmp_path / "empty"])


def test_jsonl_records_and_errors_name_the_line(tmp_path: Path) -> None:
    good = tmp_path / "corpus.jsonl"
    good.write_text('{"id": "a", "title": "Alpha", "text": "First."}\n\n{"id": 7, "text": "Second."}\n')
    docs = load_documents([good])
    assert [(d.doc_id, d.title, d.source) for d in docs] == [("a", "Alpha", "corpus.jsonl"), ("7", "7", "corpus.jsonl")]

    cases = {
        '{"id": "a", "text": "ok"}\n{"id": "b", "text": \n': r"bad\.jsonl:2: invalid JSON",
        '{"id": "a", "text": "ok"}\n{"id": "b", "text": "ok"}\n{"id": "c"}\n': r'bad\.jsonl:3: missing "text"',
        '{"title": "t", "text": "x"}\n': r'bad\.jsonl:1: missing "id"',
        '["a", "b"]\n': r"bad\.jsonl:1: expected a JSON object",
        '{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n': r"bad\.jsonl:2: duplicate id 'a' \(first on line 1\)",
        '{"id": "a", "text": "  \\n "}\n': r'bad\.jsonl:1: empty "text"',
        '{"id": true, "text": "x"}\n': r'bad\.jsonl:1: "id" must be a string or integer',
        '{"id": "a", "text": "x", "title": ["T"]}\n': r'bad\.jsonl:1: "title" must be a string',
    }
    for content, message in cases.items():
        bad = tmp_path / "bad.jsonl"
        bad.write_text(content, encoding="utf-8")
        with pytest.raises(IngestError, match=message) as err:
            load_documents([bad])  # strict: the first bad record is the error
        assert "\n" not in str(err.value)  # one line for the CLI


def test_bad_records_are_skipped_and_reported_with_file_and_line(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    lines = [
        '{"id": "a", "text": "Alpha text."}',
        '{"id": "b", "text": ""}',  # empty text: once this aborted the whole ingest
        "{not json",
        '"just a string"',
        '{"id": "a", "text": "Again."}',
        '{"id": "c", "text": 5}',
        '{"id": "d", "text": "Line separator\u2028inside stays one record."}',
    ]
    corpus.write_bytes(("\n".join(lines) + "\n").encode() + b'{"id": "e", "text": "caf\xe9"}\n'
                       + b'{"id": "f", "text": "Last."}')  # a Latin-1 line, and no final newline
    loaded = read_documents([corpus])
    assert [d.doc_id for d in loaded.documents] == ["a", "d", "f"]
    assert "\u2028" in loaded.documents[1].text
    assert [(p.line, p.reason) for p in loaded.skipped] == [
        (2, 'empty "text"'),
        (3, "invalid JSON (Expecting property name enclosed in double quotes)"),
        (4, 'expected a JSON object with "id" and "text"'),
        (5, "duplicate id 'a' (first on line 1)"),
        (6, '"id" must be a string or integer and "text" a string'),
        (8, "not UTF-8 text"),
    ]
    assert str(loaded.skipped[0]) == f'{corpus}:2: empty "text"'
    assert Skipped(str(corpus), 0, "cannot read").__str__() == f"{corpus}: cannot read"

    with pytest.raises(IngestError, match=r'corpus\.jsonl:2: empty "text"'):
        read_documents([corpus], strict=True)


def test_unreadable_files_in_a_folder_are_skipped_and_nothing_usable_is_an_error(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nReadable.", encoding="utf-8")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    loaded = read_documents([root])
    assert [d.doc_id for d in loaded.documents] == ["good"]
    assert [str(p) for p in loaded.skipped] == [f"{root / 'latin1.txt'}: not UTF-8 text (byte 3; it reads as Latin-1"
                                                "/Windows-1252: save it as UTF-8, e.g. iconv -f cp1252 -t utf-8)"]
    with pytest.raises(IngestError, match=r"latin1\.txt: not UTF-8 text"):
        read_documents([root], strict=True)

    only_bad = tmp_path / "bad.jsonl"
    only_bad.write_text('{"id": "a", "text": ""}\n{"id": "b"}\n', encoding="utf-8")
    with pytest.raises(IngestError, match=r'no usable documents in .*bad\.jsonl: 2 skipped, the first: .*:1: empty'):
        read_documents([only_bad])


def test_duplicate_doc_ids_across_inputs_are_refused(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "intro.md").write_text("Hello.", encoding="utf-8")
    with pytest.raises(IngestError, match=r"two/intro\.md: duplicate id 'intro' \(first on .*one/intro\.md\)"):
        load_documents([tmp_path / "one", tmp_path / "two"])
    loaded = read_documents([tmp_path / "one", tmp_path / "two"])
    assert [d.source for d in loaded.documents] == ["one/intro.md"]  # the first keeps the id
    assert [p.file for p in loaded.skipped] == [str(tmp_path / "two" / "intro.md")]


# --- chunking ---------------------------------------------------------------------------------------


def test_chunks_respect_sentences_size_and_carry_metadata() -> None:
    sentences = [f"Sentence number {i} talks about topic {i} in a few more words." for i in range(30)]
    doc = SourceDocument(doc_id="guide/long", title="Long Guide", source="kb/guide/long.md", text=" ".join(sentences))
    chunks = chunk_documents([doc], max_words=40, overlap_sentences=1)

    assert len(chunks) > 3
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert [c.id for c in chunks] == [f"guide/long#{i}" for i in range(len(chunks))]
    assert {(c.doc_id, c.title, c.source) for c in chunks} == {("guide/long", "Long Guide", "kb/guide/long.md")}
    for chunk in chunks:
        assert len(chunk.text.split()) <= 40
        assert all(s in sentences for s in split_sentences(chunk.text))  # no sentence is ever cut
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert split_sentences(after.text)[0] == split_sentences(before.text)[-1]  # one sentence of overlap
    covered = {s for c in chunks for s in split_sentences(c.text)}
    assert covered == set(sentences)


def test_short_docs_are_one_chunk_and_long_sentences_stay_whole() -> None:
    short = SourceDocument("s", "S", "s.md", "# Title\n\n- first item.\n- second item.")
    long_sentence = " ".join(["word"] * 300) + "."
    chunks = chunk_documents([short, SourceDocument("l", "L", "l.md", long_sentence)], max_words=180)
    assert [c.id for c in chunks] == ["s#0", "l#0"]
    assert chunks[0].text == short.text  # line breaks of lists and headings survive
    assert chunks[1].text == long_sentence


# --- BM25 -------------------------------------------------------------------------------------------


def test_bm25_finds_identifiers_and_round_trips_through_its_arrays() -> None:
    texts = list(KB.values())
    bm25 = BM25([keyword_tokens(t) for t in texts])
    assert bm25.top(keyword_tokens("E1042"), 3)[0][0] == 0
    assert bm25.top(keyword_tokens("who is user_123"), 3)[0][0] == 1
    assert bm25.top(keyword_tokens("business days"), 5)[0][0] in (2, 3)
    assert {row for row, _ in bm25.top(keyword_tokens("business days"), 5)} == {2, 3}
    assert bm25.top(keyword_tokens("unknownword"), 3) == []
    assert bm25.top([], 3) == []

    restored = BM25.from_arrays(bm25.to_arrays())
    for query in ("E1042 declined", "shipping business days", "user_123"):
        assert restored.top(keyword_tokens(query), 5) == bm25.top(keyword_tokens(query), 5)


def test_bm25_prefers_rarer_terms_and_shorter_documents() -> None:
    bm25 = BM25([["apple", "banana"], ["apple", "cherry"], ["apple", "banana", "x", "y", "z", "w"]])
    scores = dict(bm25.top(["apple", "cherry"], 3))
    assert scores[1] > scores[0]  # cherry is rare
    banana = dict(bm25.top(["banana"], 3))
    assert banana[0] > banana[2]  # same match, shorter document
    assert bm25.idf("apple") > 0  # a term in every document still never counts against a match


# --- the hybrid index -------------------------------------------------------------------------------


def test_identifier_lookups(index: HybridIndex) -> None:
    assert index.retrieve("What does E1042 mean?", ctx())[0]["doc_id"] == "errors"
    top = index.retrieve("user_123", ctx())[0]
    assert top["doc_id"] == "accounts"
    assert top["id"] == "accounts#0" and top["origin"] == "kb" and 0 < top["score"] <= 1


def test_agreement_bonus_raises_chunks_both_retrievers_find(index: HybridIndex) -> None:
    query = "how long does express shipping take"
    without = {p["id"]: p["score"] for p in index.retrieve(query, ctx(k=5, agreement_bonus=0.0, min_similarity=0))}
    bonus = {p["id"]: p["score"] for p in index.retrieve(query, ctx(k=5, agreement_bonus=0.15, min_similarity=0))}
    assert bonus["shipping#0"] == pytest.approx(without["shipping#0"] + 0.15, abs=1e-3)
    # A chunk only the vector search proposed (no shared word) gets no bonus.
    assert bonus["garden#0"] == without["garden#0"] == 0.0


def test_results_are_deduplicated_and_limited_to_k() -> None:
    extra = {"refunds-copy": KB["refunds"]}  # the same text under another document id
    index = HybridIndex.build(kb_chunks(extra), BowEmbedder())
    passages = index.retrieve("refunds payment method return", ctx(k=4, min_similarity=0))
    ids = [p["id"] for p in passages]
    assert len(ids) == len(set(ids)) == 4
    assert sum(p["text"] == KB["refunds"] for p in passages) == 1
    assert [p["score"] for p in passages] == sorted((p["score"] for p in passages), reverse=True)


def test_quality_gate_drops_unrelated_chunks_but_keeps_exact_identifiers(index: HybridIndex) -> None:
    # Nothing in the knowledge base shares a word with the garden chunk's topic: it must not fill a slot.
    passages = index.retrieve("payment declined by the bank", ctx(k=5))
    assert "garden" not in {p["doc_id"] for p in passages}
    assert passages[0]["doc_id"] == "errors"
    # With a gate no cosine passes, an exact identifier still gets through; plain shared words do not.
    strict = ctx(k=5, min_similarity=0.99)
    assert [p["doc_id"] for p in index.retrieve("declined payment E1042 business days", strict)] == ["errors"]
    assert index.retrieve("business days shipping", strict) == []


def test_empty_query_returns_nothing(index: HybridIndex) -> None:
    assert index.retrieve("", ctx()) == []
    assert index.retrieve("   \n", ctx()) == []


def test_build_reports_progress_per_batch() -> None:
    docs = [SourceDocument(f"d{i}", f"D{i}", "x.md", f"Document {i} text.") for i in range(130)]
    calls: list[tuple[int, int]] = []
    HybridIndex.build(chunk_documents(docs), BowEmbedder(), on_progress=lambda d, t: calls.append((d, t)),
                      text_vectors=False)
    assert calls == [(64, 130), (128, 130), (130, 130)]
    # With the stored text vectors each chunk adds its text without the title ("Document 0 text."): twice the texts
    # to embed, so a report every 64 texts is one every 32 chunks.
    calls.clear()
    HybridIndex.build(chunk_documents(docs), BowEmbedder(), on_progress=lambda d, t: calls.append((d, t)))
    assert calls == [(32, 130), (64, 130), (96, 130), (128, 130), (130, 130)]
    with pytest.raises(IngestError, match="nothing to index"):
        HybridIndex.build([], BowEmbedder())


# --- persistence ------------------------------------------------------------------------------------


def test_save_load_round_trip_returns_identical_results(index: HybridIndex, tmp_path: Path) -> None:
    index.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["embedder"] == "test/bow" and manifest["dim"] == BowEmbedder.dim
    assert (manifest["chunks"], manifest["documents"], manifest["format_version"]) == (len(index), 5, 2)
    assert manifest["created"]

    loaded = HybridIndex.load(tmp_path / "idx", BowEmbedder())
    assert loaded.chunks == index.chunks
    for query in ("E1042", "user_123 email", "when do refunds arrive", "tomatoes watering", "express shipping"):
        settings = ctx(k=5, min_similarity=0)
        assert loaded.retrieve(query, settings) == index.retrieve(query, settings)


def test_loading_with_another_embedder_names_both(index: HybridIndex, tmp_path: Path) -> None:
    index.save(tmp_path / "idx")
    with pytest.raises(IngestError, match=r"built with embedder 'test/bow' but the current embedder is 'other/model'"):
        HybridIndex.load(tmp_path / "idx", BowEmbedder("other/model"))


def test_an_index_records_its_keyword_tokenizer_and_refuses_another(index: HybridIndex, tmp_path: Path) -> None:
    from selfcrag.text.text import TOKENIZER

    index.save(tmp_path / "idx")
    manifest_path = tmp_path / "idx" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["tokenizer"] == TOKENIZER
    del manifest["tokenizer"]  # an index from before Chinese was cut into pairs
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IngestError, match=r"built with keyword tokenizer 'words/1' but the current one is .*; rebuild "
                       r"its keyword index with `selfcrag reindex "):
        HybridIndex.load(tmp_path / "idx", BowEmbedder())
    reindex(tmp_path / "idx")  # the keywords are cut again from the stored chunks
    assert json.loads(manifest_path.read_text())["tokenizer"] == TOKENIZER
    loaded = HybridIndex.load(tmp_path / "idx", BowEmbedder())
    assert loaded.retrieve("refund policy", ctx()) == index.retrieve("refund policy", ctx())


def test_chinese_chunks_are_kept_whole_and_found_by_their_words() -> None:
    docs = [SourceDocument("zh", "退货", "zh.md", "大多数商品的退货期限为 30 天。电子产品为 15 天。")]
    [chunk] = chunk_documents(docs)
    assert chunk.text == "大多数商品的退货期限为 30 天。电子产品为 15 天。"  # no space added between sentences
    index = HybridIndex.build(kb_chunks() + [chunk], BowEmbedder())
    assert index.retrieve("退货期限是多少天？", ctx())[0]["doc_id"] == "zh"


class EnglishOnlyBow(BowEmbedder):
    languages = frozenset({"en"})


def test_a_query_the_embedder_cannot_read_is_scored_by_its_terms() -> None:
    extra = {"zh_refunds": "退款会在检查通过后 5 到 7 个工作日内到账。", "zh_garden": "番茄需要充足的阳光。"}
    index = HybridIndex.build(kb_chunks(extra), EnglishOnlyBow())
    index.embedder = EnglishOnlyBow()
    passages = index.retrieve("退款多久到账？", ctx(min_similarity=0.0))
    # Only chunks sharing a query term pass: a vector of [UNK]s says nothing, even with the gate wide open.
    assert [p["doc_id"] for p in passages] == ["zh_refunds"]
    assert passages[0]["score"] == pytest.approx(1.0)  # every query term found, and the best BM25 match
    assert [p["doc_id"] for p in index.retrieve("E1042 是什么意思？", ctx())] == ["errors"]


def test_missing_or_incomplete_index_says_how_to_build_one(index: HybridIndex, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(IngestError) as err:
        HybridIndex.load(missing, BowEmbedder())
    assert str(err.value) == f"no index at {missing}; build one with `selfcrag ingest PATH --index {missing}`"

    index.save(tmp_path / "idx")
    (tmp_path / "idx" / "manifest.json").unlink()  # written last: a save that never finished
    with pytest.raises(IngestError, match="no index at"):
        HybridIndex.load(tmp_path / "idx", BowEmbedder())
    index.save(tmp_path / "idx")
    (tmp_path / "idx" / "chunks.jsonl").write_text("{not json\n")
    with pytest.raises(IngestError, match="is damaged"):
        HybridIndex.load(tmp_path / "idx", BowEmbedder())


def _rewrite_json(path: Path, change) -> None:
    state = json.loads(path.read_text())
    change(state)
    path.write_text(json.dumps(state))


def legacy_state(bm25: BM25) -> dict:
    """The JSON state indexes kept in bm25.json before bm25.npz (what they still load from)."""
    postings = {term: [[int(r), int(f)] for r, f in zip(bm25.rows[bm25.start[t]:bm25.start[t + 1]],
                                                           bm25.tf[bm25.start[t]:bm25.start[t + 1]], strict=True)]
                for t, term in enumerate(bm25.terms)}
    return {"format": 1, "k1": bm25.k1, "b": bm25.b, "doc_len": bm25.doc_len.tolist(), "postings": postings}


def _chunk_line(n: int, change):
    def damage(idx: Path) -> None:
        lines = (idx / "chunks.jsonl").read_text().splitlines()
        record = json.loads(lines[n - 1])
        change(record)
        lines[n - 1] = json.dumps(record)
        (idx / "chunks.jsonl").write_text("\n".join(lines) + "\n")
    return damage


def _truncate(name: str, keep: float):
    def damage(idx: Path) -> None:
        data = (idx / name).read_bytes()
        (idx / name).write_bytes(data[: int(len(data) * keep)])
    return damage


def _huge_header(idx: Path) -> None:
    """4.6 KB of vectors whose header claims 2 GB: faiss would allocate the 2 GB before noticing."""
    import struct

    d, n = 512, 1_048_576
    (idx / "vectors.faiss").write_bytes(struct.pack("<4siqqqBiQ", b"IxFI", d, n, 1 << 20, 1 << 20, 1, 0, d * n)
                                        + bytes(4_560))


DAMAGE = {
    "chunk_index as a string": (_chunk_line(3, lambda r: r.update(chunk_index="0")),
                                'chunks.jsonl line 3: "chunk_index" must be an integer'),
    "chunk without text": (_chunk_line(2, lambda r: r.pop("text")), 'chunks.jsonl line 2: "text" is missing'),
    "chunk id of another chunk": (_chunk_line(1, lambda r: r.update(id="garden#0")),
                                  "chunks.jsonl line 1: \"id\" 'garden#0' does not match"),
    "chunk line truncated": (_truncate("chunks.jsonl", 0.9), "chunks.jsonl line 5: invalid JSON"),
    "last chunk line missing": (lambda idx: (idx / "chunks.jsonl").write_text(
        "".join((idx / "chunks.jsonl").read_text().splitlines(keepends=True)[:4])),
        "chunks.jsonl: 4 chunks but manifest.json says 5"),
    "chunk line not UTF-8": (lambda idx: (idx / "chunks.jsonl").write_bytes(
        (idx / "chunks.jsonl").read_bytes().replace(b"Tomatoes", b"Tom\xe4toes")), "chunks.jsonl line 5: not UTF-8"),
    "vectors truncated": (_truncate("vectors.faiss", 0.5), "vectors.faiss: 5,142 bytes but its header claims "
                                                           "5 vectors of 512 dimensions (10,285 bytes)"),
    "vectors cut inside the header": (_truncate("vectors.faiss", 0.001), "too short for a FAISS header"),
    "vectors claiming 2 GB": (_huge_header, "vectors.faiss: 4,605 bytes but its header claims 1,048,576 vectors"),
    "vectors of another kind": (lambda idx: (idx / "vectors.faiss").write_bytes(
        b"IxF2" + (idx / "vectors.faiss").read_bytes()[4:]), "not a flat inner-product FAISS index"),
    "manifest dim a string": (lambda idx: _rewrite_json(idx / "manifest.json", lambda m: m.update(dim="512")),
                              'manifest.json: "dim" must be an integer, not "512"'),
    "manifest counts one chunk more": (lambda idx: _rewrite_json(idx / "manifest.json", lambda m: m.update(chunks=6)),
                                       "vectors.faiss: holds 5 vectors of 512 dimensions but manifest.json says 6"),
    "manifest a list": (lambda idx: (idx / "manifest.json").write_text("[]"), "manifest.json: expected a JSON object"),
    "manifest truncated": (_truncate("manifest.json", 0.5), "manifest.json: invalid JSON"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_index_is_refused_in_one_line_naming_file_and_fault(case: str, index: HybridIndex,
                                                                      tmp_path: Path) -> None:
    damage, message = DAMAGE[case]
    idx = tmp_path / "idx"
    index.save(idx)
    damage(idx)
    with pytest.raises(IngestError) as err:
        HybridIndex.load(idx, BowEmbedder())
    text = str(err.value)
    assert text.startswith(f"index at {idx} is damaged: ")
    assert message in text
    assert text.endswith(f"; rebuild it with `selfcrag ingest PATH --index {idx}`")
    assert "\n" not in text


def test_bm25_state_is_checked_before_it_is_used() -> None:
    good = legacy_state(BM25([["a", "b"], ["b"]]))
    assert BM25.from_dict(good).top(["b"], 2) == BM25([["a", "b"], ["b"]]).top(["b"], 2)
    bad = {
        "not an object": ([], "expected a JSON object"),
        "b above 1": ({**good, "b": 1.5}, '"b" must be a number from 0 to 1'),
        "k1 true": ({**good, "k1": True}, '"k1" must be a non-negative number'),
        "postings a list": ({**good, "postings": []}, '"postings" must be an object'),
        "entry not a pair": ({**good, "postings": {"a": [[0]]}}, "is not a [row, frequency] pair"),
        "negative row": ({**good, "postings": {"a": [[-1, 1]]}}, "is not a [row, frequency] pair"),
        "frequency 0": ({**good, "postings": {"a": [[0, 0]]}}, "row 0 has frequency 0"),
    }
    for state, message in bad.values():
        with pytest.raises(ValueError, match=re.escape(message)):
            BM25.from_dict(state)


# --- the vector index type (vector_index.py) -----------------------------------------------------------


def many_chunks(n: int = 300) -> list:
    words = ["refund", "invoice", "shipping", "password", "garden", "tomato", "bridge", "river", "card", "bank"]
    texts = {f"doc{i}": " ".join(words[(i * 7 + j * 3) % len(words)] + str(j % (i % 5 + 2)) for j in range(12))
             for i in range(n)}
    return chunk_documents([SourceDocument(d, d, f"{d}.md", t) for d, t in texts.items()])


def test_hnsw_index_is_recorded_and_round_trips(tmp_path: Path) -> None:
    from selfcrag.knowledge.vector_index import kind_of

    chunks = many_chunks()
    flat = HybridIndex.build(chunks, BowEmbedder(), vector_kind="flat")
    hnsw = HybridIndex.build(chunks, BowEmbedder(), vector_kind="hnsw")  # loaded below: the same graph
    assert (kind_of(flat._vectors), kind_of(hnsw._vectors)) == ("flat", "hnsw")
    hnsw.save(tmp_path / "idx")
    assert json.loads((tmp_path / "idx" / "manifest.json").read_text())["vector_index"] == "hnsw"
    loaded = HybridIndex.load(tmp_path / "idx", BowEmbedder())
    assert kind_of(loaded._vectors) == "hnsw"
    for query in ["refund3 invoice1", "garden tomato2", "bridge0 river1 bank", "password4 card"]:
        assert [p["id"] for p in loaded.retrieve(query, ctx(k=5, min_similarity=0))] == \
            [p["id"] for p in hnsw.retrieve(query, ctx(k=5, min_similarity=0))]


def test_hnsw_search_matches_flat_on_a_small_index() -> None:
    from selfcrag.knowledge.vector_index import build, search

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((500, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    flat, hnsw = build(vectors, "flat"), build(vectors, "hnsw")
    hits = sum(len(set(search(flat, q[None], 5).tolist()) & set(search(hnsw, q[None], 5).tolist()))
               for q in vectors[:50])
    assert hits >= 0.95 * 250  # approximate, but at this size it misses next to nothing


def test_vector_index_setting_picks_the_type(monkeypatch) -> None:
    from selfcrag.knowledge.vector_index import AUTO_HNSW_FROM, chosen, kind_of

    assert chosen("auto", AUTO_HNSW_FROM - 1) == "flat" and chosen("auto", AUTO_HNSW_FROM) == "hnsw"
    assert chosen("flat", 10**7) == "flat" and chosen("hnsw", 3) == "hnsw"
    with pytest.raises(ValueError, match="unknown vector_index 'ivf'"):
        chosen("ivf", 3)
    monkeypatch.setenv("SELFCRAG_VECTOR_INDEX", "hnsw")  # the operator's setting, read at build
    assert kind_of(HybridIndex.build(kb_chunks(), BowEmbedder())._vectors) == "hnsw"


def _hnsw_graph(change):
    """Rewrite one array of a saved HNSW index's graph (vectors.faiss) in place, keeping its length."""
    def damage(idx: Path) -> None:
        import struct

        data = bytearray((idx / "vectors.faiss").read_bytes())
        at = struct.calcsize("<4siqqqBi")
        for name, dtype in (("assign_probas", "<f8"), ("cum", "<i4"), ("levels", "<i4"), ("offsets", "<u8"),
                            ("neighbors", "<i4")):
            count = struct.unpack_from("<Q", data, at)[0]
            size = count * np.dtype(dtype).itemsize
            if name == "neighbors":
                values = np.frombuffer(bytes(data[at + 8 : at + 8 + size]), dtype=dtype).copy()
                change(values)
                data[at + 8 : at + 8 + size] = values.tobytes()
            at += 8 + size
        (idx / "vectors.faiss").write_bytes(bytes(data))
    return damage


@pytest.mark.parametrize(("damage", "message"), [
    (_hnsw_graph(lambda n: n.__setitem__(0, 10**6)), "HNSW graph is inconsistent (a neighbour id is out of range)"),
    (_truncate("vectors.faiss", 0.02), "runs past the end of the file"),
    (_truncate("vectors.faiss", 0.9), "but its header claims"),
    (lambda idx: _rewrite_json(idx / "manifest.json", lambda m: m.update(vector_index="flat")),
     "not a flat inner-product FAISS index (type b'IHNf'"),
    (lambda idx: _rewrite_json(idx / "manifest.json", lambda m: m.update(vector_index="ivf")),
     'manifest.json: "vector_index" must be "flat" or "hnsw"'),
])
def test_a_damaged_hnsw_index_is_refused_before_faiss_reads_it(damage, message: str, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    HybridIndex.build(kb_chunks(), BowEmbedder(), vector_kind="hnsw").save(idx)
    damage(idx)
    with pytest.raises(IngestError) as err:
        HybridIndex.load(idx, BowEmbedder())
    assert message in str(err.value) and "\n" not in str(err.value)


# --- saving whole or not at all ---------------------------------------------------------------------


def other_index() -> HybridIndex:
    return HybridIndex.build(kb_chunks({"billing": "Invoices are sent on the first day of each month."}), BowEmbedder())


def siblings(idx: Path) -> list[str]:
    return sorted(p.name for p in idx.parent.iterdir() if p.name != idx.name)


def test_a_save_that_hits_a_full_disk_keeps_the_old_index(index: HybridIndex, tmp_path: Path, monkeypatch) -> None:
    from selfcrag.knowledge import index_files

    idx = tmp_path / "idx"
    index.save(idx)
    real_write = index_files._write

    def full_disk(path: Path, parts) -> None:
        if path.name == "chunks.jsonl":  # the vectors were written; the disk fills on the next file
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(path, parts)

    monkeypatch.setattr(index_files, "_write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        other_index().save(idx)
    monkeypatch.undo()
    assert HybridIndex.load(idx, BowEmbedder()).chunks == index.chunks
    assert siblings(idx) == []  # the half-written new index is gone


def test_ctrl_c_or_a_failed_rename_during_a_save_keeps_the_old_index(index: HybridIndex, tmp_path: Path,
                                                                     monkeypatch) -> None:
    from selfcrag.knowledge import index_files

    idx = tmp_path / "idx"
    index.save(idx)

    def interrupted(*args) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(index_files, "write_files", interrupted)
    with pytest.raises(KeyboardInterrupt):
        other_index().save(idx)
    monkeypatch.undo()
    assert HybridIndex.load(idx, BowEmbedder()).chunks == index.chunks and siblings(idx) == []

    real_rename = os.rename

    def refuse_the_new_one(src, dst) -> None:
        if ".tmp-" in str(src):  # the old index is already moved aside: it must come back
            raise OSError(errno.EIO, "Input/output error")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", refuse_the_new_one)
    with pytest.raises(OSError, match="Input/output error"):
        other_index().save(idx)
    monkeypatch.undo()
    assert HybridIndex.load(idx, BowEmbedder()).chunks == index.chunks and siblings(idx) == []


def test_a_save_killed_between_its_renames_is_rolled_back_by_the_next_load(index: HybridIndex,
                                                                          tmp_path: Path) -> None:
    # What a saver killed after moving the old index aside leaves: no DIR, the old one and its new one beside.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    idx = tmp_path / "idx"
    index.save(tmp_path / f"idx.old-{dead}-0badcafe")
    other_index().save(tmp_path / f"idx.tmp-{dead}-0badcafe")
    assert HybridIndex.load(idx, BowEmbedder()).chunks == index.chunks  # the save did not finish: the old one
    assert siblings(idx) == [f"idx.tmp-{dead}-0badcafe"]
    other_index().save(idx)  # the next save removes what the dead saver left
    assert siblings(idx) == []
    assert HybridIndex.load(idx, BowEmbedder()).chunks == other_index().chunks


def test_a_save_never_replaces_a_directory_that_is_not_an_index(index: HybridIndex, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("My notes.", encoding="utf-8")
    with pytest.raises(IngestError, match=r"docs holds files that are not an index's \(notes\.md\); saving "):
        index.save(docs)
    assert (docs / "notes.md").read_text(encoding="utf-8") == "My notes."
    (tmp_path / "file").write_text("x")
    with pytest.raises(IngestError, match="is a file; an index needs a directory of its own"):
        index.save(tmp_path / "file")
    empty = tmp_path / "empty"
    empty.mkdir()
    index.save(empty)
    assert HybridIndex.load(empty, BowEmbedder()).chunks == index.chunks


def test_concurrent_saves_and_loads_see_whole_indexes_only(tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    first, second = HybridIndex.build(kb_chunks(), BowEmbedder()), other_index()
    first.save(idx)
    wholes = {tuple(c.id for c in first.chunks), tuple(c.id for c in second.chunks)}
    seen: list[tuple[str, ...]] = []
    errors: list[BaseException] = []

    def save(which: HybridIndex) -> None:
        try:
            for _ in range(15):
                which.save(idx)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    def load() -> None:
        try:
            for _ in range(40):
                seen.append(tuple(c.id for c in HybridIndex.load(idx, BowEmbedder()).chunks))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(first,)), threading.Thread(target=save, args=(second,)),
               threading.Thread(target=load)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(seen) == 40 and set(seen) <= wholes
    assert tuple(c.id for c in HybridIndex.load(idx, BowEmbedder()).chunks) in wholes and siblings(idx) == []


def test_open_index_is_cached_and_index_for_picks_the_source(index: HybridIndex, tmp_path: Path) -> None:
    index.save(tmp_path / "idx")
    embedder = BowEmbedder()
    first = open_index(str(tmp_path / "idx"), embedder)
    assert open_index(str(tmp_path / "." / "idx"), embedder) is first  # same resolved path: loaded once
    assert index_for(Context(index_dir=str(tmp_path / "idx")), embedder) is first
    index.save(tmp_path / "idx")  # rebuilt: a new manifest file, so loaded again, then that one kept
    again = open_index(str(tmp_path / "idx"), embedder)
    assert again is not first and open_index(str(tmp_path / "idx"), embedder) is again
    with pytest.raises(IngestError, match="no index at"):
        index_for(Context(index_dir=str(tmp_path / "missing")), embedder)

    sample = index_for(Context(), embedder)
    assert sample is sample_index(embedder)
    assert isinstance(sample, HybridIndex) and sample.documents >= 5
    assert all(p["source"].startswith("sample_kb/") for p in sample.retrieve("refund", ctx()))


def test_sample_index_is_built_once_then_loaded_from_the_cache(tmp_path: Path, monkeypatch) -> None:
    from selfcrag.knowledge import loaded_indexes

    monkeypatch.setenv("SELFCRAG_CACHE_DIR", str(tmp_path))
    embedder = BowEmbedder("test/bow-cache")
    built = sample_index(embedder)
    [cached] = list(tmp_path.iterdir())  # saved whole: no staging directory left beside it
    assert (cached / "manifest.json").exists()

    monkeypatch.setattr(loaded_indexes, "_cache", {})  # a new process: nothing in memory
    monkeypatch.setattr(HybridIndex, "build", lambda *a, **k: pytest.fail("the cached index should be loaded"))
    loaded = sample_index(embedder)
    assert loaded is not built and loaded.documents == built.documents
    assert [p["id"] for p in loaded.retrieve("refund", ctx())] == [p["id"] for p in built.retrieve("refund", ctx())]


def test_sample_index_works_when_the_cache_cannot_be_written(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SELFCRAG_CACHE_DIR", str(blocker))
    assert sample_index(BowEmbedder("test/bow-readonly")).retrieve("refund", ctx())


def test_import_loads_no_model_or_index() -> None:
    code = "import sys, selfcrag.knowledge.retrieval; print(sorted({'faiss', 'onnxruntime'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --- LangChain --------------------------------------------------------------------------------------


class FixedRetriever(BaseRetriever):
    documents: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.documents


def test_langchain_retriever_maps_dedupes_scores_and_truncates() -> None:
    docs = [
        Document("Refunds take 5 days.", metadata={"doc_id": "refunds", "chunk_index": 2, "title": "Refunds",
                                                   "source": "kb/refunds.md", "score": 0.9}),
        Document("Refunds take 5 days.", metadata={"doc_id": "refunds", "chunk_index": 2}),  # same chunk again
        Document("Shipping is free.", metadata={"source": "web/shipping.html", "relevance_score": 0.4}),
        Document("Part two of the page.", metadata={"source": "web/shipping.html"}),  # no chunk index: kept
        Document("No metadata at all."),
        Document("Beyond k."),
    ]
    adapter = LangChainRetriever(FixedRetriever(documents=docs))
    passages = adapter.retrieve("refunds", Context(k=4))

    assert [p["id"] for p in passages] == ["refunds#2", "web/shipping.html#0", "web/shipping.html#1", "result-4#0"]
    first = passages[0]
    assert (first["title"], first["source"], first["chunk_index"]) == ("Refunds", "kb/refunds.md", 2)
    assert first["score"] == 0.9
    assert passages[1]["score"] == 0.4 and passages[1]["title"] == "web/shipping.html"
    assert passages[2]["score"] == pytest.approx(1 / 4)  # rank-based: fourth result
    assert passages[3]["score"] == pytest.approx(1 / 5)
    assert all(p["origin"] == "kb" for p in passages)
    assert adapter.retrieve("  ", Context()) == []


# --- the real embedder ------------------------------------------------------------------------------


def test_real_embedder_retrieves_by_meaning() -> None:
    from selfcrag.knowledge.embeddings import default_embedder

    docs = [
        SourceDocument("refunds", "Refunds", "refunds.md",
                       "We reimburse the full purchase price to your original card within five days of "
                       "receiving the returned item."),
        SourceDocument("password", "Password reset", "password.md",
                       "To reset your password, open the sign-in page and follow the link we email you."),
        SourceDocument("shipping", "Shipping", "shipping.md",
                       "Parcels leave our warehouse the next working day and arrive within a week."),
        SourceDocument("garden", "Garden", "garden.md", "Tomatoes need full sun and regular watering."),
    ]
    index = HybridIndex.build(chunk_documents(docs), default_embedder())
    query = "How do I get my money back?"
    assert not set(keyword_tokens(query)) & set(keyword_tokens(docs[0].text))  # no shared word to lean on
    passages = index.retrieve(query, Context(k=2))
    assert passages[0]["doc_id"] == "refunds"
    assert "garden" not in {p["doc_id"] for p in index.retrieve(query, Context(k=4))}


# --- stored text vectors (vector_store) ---------------------------------------------------------------------


def test_an_index_stores_vectors_of_what_the_offline_components_compare(index: HybridIndex, tmp_path: Path) -> None:
    from selfcrag.knowledge.vector_store import KEYS_FILE, VECTORS_FILE, key
    from selfcrag.text.cuts import strips_of

    store = index.text_vectors
    assert store is not None and store.embedder == "test/bow"
    errors = next(c for c in index.chunks if c.doc_id == "errors")
    # The passage as graded (without the title the FAISS vector has), each sentence, each strip of the default size.
    wanted = [errors.text, *split_sentences(errors.text), *(strip for strip, _ in strips_of(errors.text, 2))]
    assert len(set(wanted)) == 5  # the last strip is the last sentence alone
    for text in wanted:
        assert np.array_equal(store.get(key(text)), BowEmbedder().embed_documents([text])[0])
    assert store.get(key("a text no chunk holds")) is None

    index.save(tmp_path / "idx")
    assert (tmp_path / "idx" / VECTORS_FILE).is_file() and (tmp_path / "idx" / KEYS_FILE).is_file()
    loaded = HybridIndex.load(tmp_path / "idx", BowEmbedder()).text_vectors
    assert loaded is not None and len(loaded) == len(store)
    for text in wanted:
        assert np.array_equal(loaded.get(key(text)), store.get(key(text)))


def test_an_index_saved_without_stored_vectors_loads_and_retrieves_the_same(index: HybridIndex, tmp_path: Path) -> None:
    from selfcrag.knowledge.vector_store import VECTORS_FILE

    index.save(tmp_path / "with")
    plain = HybridIndex.build(kb_chunks(), BowEmbedder(), text_vectors=False)
    assert plain.text_vectors is None
    plain.save(tmp_path / "without")
    assert not (tmp_path / "without" / VECTORS_FILE).exists()
    with_store = HybridIndex.load(tmp_path / "with", BowEmbedder())
    without = HybridIndex.load(tmp_path / "without", BowEmbedder())
    assert without.text_vectors is None and with_store.text_vectors is not None
    settings = ctx(k=5, min_similarity=0)
    for query in ("E1042", "when do refunds arrive", "tomatoes watering"):
        assert without.retrieve(query, settings) == with_store.retrieve(query, settings)


def test_saving_without_stored_vectors_removes_an_earlier_index_s(index: HybridIndex, tmp_path: Path) -> None:
    from selfcrag.knowledge.vector_store import KEYS_FILE, VECTORS_FILE

    index.save(tmp_path / "idx")
    # Rebuilt in the same directory without them: the old vectors describe texts of another index.
    HybridIndex.build(kb_chunks({"extra": "Gift cards never expire."}), BowEmbedder(), text_vectors=False).save(
        tmp_path / "idx")
    assert not (tmp_path / "idx" / VECTORS_FILE).exists() and not (tmp_path / "idx" / KEYS_FILE).exists()
    assert HybridIndex.load(tmp_path / "idx", BowEmbedder()).text_vectors is None


def test_damaged_stored_vectors_are_skipped_with_a_warning(index: HybridIndex, tmp_path: Path, caplog) -> None:
    from selfcrag.knowledge.vector_store import KEYS_FILE

    index.save(tmp_path / "idx")
    keys = tmp_path / "idx" / KEYS_FILE
    keys.write_bytes(keys.read_bytes()[:-40])  # a disk fault cut the file
    with caplog.at_level("WARNING", logger="selfcrag.knowledge.vector_store"):
        loaded = HybridIndex.load(tmp_path / "idx", BowEmbedder())
    assert loaded.text_vectors is None  # the index still answers: questions embed what the store would have had
    assert "ignoring the stored text vectors" in caplog.text
    assert loaded.retrieve("E1042", ctx())[0]["doc_id"] == "errors"


def test_an_embedder_without_a_name_gets_no_stored_vectors() -> None:
    class Nameless:
        dim = BowEmbedder.dim

        def embed_documents(self, texts: list[str]) -> np.ndarray:
            return BowEmbedder().embed_documents(texts)

        def embed_query(self, text: str) -> np.ndarray:
            return BowEmbedder().embed_query(text)

    # Its vectors could not be told from another nameless model's: nothing to store, nothing to look up.
    assert HybridIndex.build(kb_chunks(), Nameless()).text_vectors is None  # type: ignore[arg-type]


def test_prompts_show_a_documents_strips_in_reading_order_and_run_neighbours_together():
    from selfcrag.llm.refiner import strips_of
    from selfcrag.prompts.evidence import doc_labels, evidence_blocks

    passage = {"id": "a#0", "doc_id": "a", "title": "A", "source": "a.md", "score": 0.5,
               "text": "One came first. Two came next. Three was third. Four was fourth. Five was last."}
    one_two, three_four, five = strips_of([passage], 2)
    assert (one_two["start"], one_two["end"], five["start"], five["end"]) == (0, 2, 4, 5)
    best_first = [five, one_two, three_four]  # as the refiner ranks them
    assert "One came first. Two came next. Three was third. Four was fourth. Five was last." in evidence_blocks(
        best_first, doc_labels(best_first))
    gap = [five, one_two]
    assert "One came first. Two came next.\n...\nFive was last." in evidence_blocks(gap, doc_labels(gap))
    whole = [{**five, "start": None}, one_two]  # a strip without a place keeps the order it was given
    whole[0].pop("start")
    assert "Five was last.\n...\nOne came first." in evidence_blocks(whole, doc_labels(whole))


def test_a_strip_window_keeps_the_sentences_that_go_on_from_a_kept_strip_within_the_limits():
    from selfcrag.context import Context
    from selfcrag.llm.refiner import LLMRefiner

    passage = {"id": "h#0", "doc_id": "h", "title": "House", "source": "h.md", "score": 0.8,
               "text": "Human Error is the season finale of the third season of House. The episode was shown in May. "
                       "It aired on Fox. Its ratings were high. Critics praised the cast. Reviews were mixed."}
    other = {**passage, "id": "o#0", "doc_id": "o", "text": "The season finale drew critics. Nothing else here."}
    question = "Human Error is the season finale of a show broadcast by what network?"
    refiner = LLMRefiner(None)  # type: ignore[arg-type]  # refine_with="scores" makes no model call

    def kept(**settings):
        strips = refiner.refine(question, [passage, other], Context(**settings)).strips
        return [(s["doc_id"], s["start"]) for s in strips]

    assert kept() == [("h", 0), ("o", 0)]  # "It aired on Fox" shares no word with the question
    assert kept(strip_window=1) == [("h", 0), ("o", 0), ("h", 2)]  # the next strip of the same passage only
    assert kept(strip_window=2) == [("h", 0), ("o", 0), ("h", 2), ("h", 4)]
    assert kept(strip_window=2, max_strips=3) == [("h", 0), ("o", 0), ("h", 2)]
    assert kept(strip_window=1, strip_token_budget=30) == [("h", 0), ("o", 0)]  # no room for it


def test_every_passage_the_grader_kept_can_give_its_best_strip_though_it_shares_no_word_with_the_question():
    from selfcrag.context import Context
    from selfcrag.llm.refiner import LLMRefiner

    first = {"id": "s#0", "doc_id": "s", "title": "Human Error", "source": "s.md", "score": 0.8,
             "text": "Human Error is the season finale of the third season of House. It was shown in May."}
    second = {**first, "id": "h#0", "doc_id": "h", "title": "House", "score": 0.7,
              "text": "House is an American medical drama. It aired on Fox for eight years."}
    question = "Human Error is the season finale of a show broadcast by what network?"
    refiner = LLMRefiner(None)  # type: ignore[arg-type]  # refine_with="scores" makes no model call

    def kept(**settings):
        return [s["doc_id"] for s in refiner.refine(question, [first, second], Context(**settings)).strips]

    assert kept() == ["s"]  # the second hop shares no word with the question
    assert kept(strip_every_passage=True) == ["s", "h"]
    assert kept(strip_every_passage=True, max_strips=1) == ["s"]  # within the limits


def test_a_filtered_vector_search_returns_depth_rows_on_hnsw_too() -> None:
    """HNSW with a FAISS IDSelector walks past rows it may not return and can come back short on a selective filter;
    the allowed rows are then compared exactly, so a filter never costs results (vector_index.search)."""
    from selfcrag.knowledge import vector_index

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((2000, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    allowed = np.asarray([5, 700, 1500, 1999], dtype=np.int64)
    exact = allowed[np.argsort(-(vectors[allowed] @ vectors[0]))][:3].tolist()
    for kind in ("flat", "hnsw"):
        found = [int(r) for r in vector_index.search(vector_index.build(vectors, kind), vectors[:1], 3, allowed)]
        assert found == exact, kind


def test_metadata_filters_say_what_they_support() -> None:
    from selfcrag.knowledge.metadata_filter import parse

    where = parse({"tenant": "acme", "n": {"$in": [1, 2.0]}, "live": {"$eq": True}})
    assert where is not None
    assert where.matches({"tenant": "acme", "n": 2, "live": True})
    assert not where.matches({"tenant": "acme", "n": 2, "live": 1})  # JSON's true is not 1
    assert not where.matches({"tenant": ["acme"], "n": 1, "live": True})  # a list is not its element
    assert where.and_(parse({"n": 1})).matches({"tenant": "acme", "n": 1, "live": True})
    assert not where.and_(parse({"n": 3})).matches({"tenant": "acme", "n": 3, "live": True})  # never wider
    for bad, reason in (({"n": {"$gt": 1}}, r"\$gt is not supported"), ({"$or": []}, "key '\\$or' is not"),
                        ({"n": [1]}, "not a string, number or boolean"), ("tenant", "must be an object"),
                        ({"n": {"$in": 1}}, "takes a list")):
        with pytest.raises(ValueError, match=reason):
            parse(bad)


def test_a_tenant_run_on_a_retriever_that_cannot_filter_fails_in_one_line_rather_than_search_everyone() -> None:
    from selfcrag.backend import searched

    adapter = LangChainRetriever(FixedRetriever(documents=[Document("Globex's secret refund policy.")]))
    assert searched(adapter, None, Context()) is adapter  # unscoped: the caller's retriever as it is
    with pytest.raises(IngestError, match="scopes only selfcrag's own indexes.*every tenant's documents"):
        searched(adapter, None, Context(tenant="acme"))
