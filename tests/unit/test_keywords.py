"""keywords.py (tantivy + forward index) against bm25.py, the reference BM25, and reindex.py (issue 46)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from selfcrag.errors import IngestError
from selfcrag.knowledge import index_files, keywords
from selfcrag.knowledge.bm25 import BM25
from selfcrag.knowledge.ingestion import IngestReport, ingest, write_documents
from selfcrag.knowledge.keywords import Keywords
from selfcrag.knowledge.reindex import reindex
from selfcrag.knowledge.retrieval import HybridIndex, index_text
from selfcrag.text.text import keyword_tokens
from tests.unit.test_retrieval import BowEmbedder, ctx, kb_chunks

TEXTS = [
    "Refunds are issued within 14 days of receiving the returned item.",
    "Error E1042 means the card was declined by the bank; ask user_123 to retry.",
    "退款会在检查通过后 5 到 7 个工作日内到账。退款 退款",
    "大多数商品的退货期限为 30 天。电子产品为 15 天。",
    "Shipping takes 3-5 business days; express shipping takes one day.",
    "The garden needs sun: tomatoes need six hours of sun a day.",
    "",  # a chunk with no keywords at all
    "refund refund refund policy for damaged items and refund timing",
]
QUERIES = ["refund", "how long do refunds take", "E1042 card declined", "退款多久到账", "退货期限", "sun tomatoes",
           "shipping refund days", "nothing matches zyzzyva", "user_123", "天"]


def corpus(n: int, seed: int = 1) -> list[list[str]]:
    """`n` chunks of the texts' words and a few common words, in random lengths: many chunks hold each query word,
    with many near-equal scores (what makes a top n hard to find without scoring everything)."""
    rng = random.Random(seed)
    words = [t for text in TEXTS for t in keyword_tokens(text)] + ["day"] * 20 + ["item"] * 10
    return [[rng.choice(words) for _ in range(rng.randint(0, 40))] for _ in range(n)]


def queries() -> list[list[str]]:
    return [keyword_tokens(q) for q in QUERIES]


def check_same(documents: list[list[str]], kw: Keywords) -> None:
    ref = BM25(documents)
    rows = np.arange(len(documents))
    for q in queries():
        assert np.array_equal(kw.score_rows(q, rows), ref.score_all(q))  # to the last bit
        for n in (1, 3, 20):
            assert kw.top(q, n) == ref.top(q, n)
        among = rows[::3]
        assert kw.top_among(q, among, 5) == ref.top_among(q, among, 5)
        for term in q:
            assert [kw.contains(term, r) for r in range(len(documents))] == [ref.contains(term, r)
                                                                            for r in range(len(documents))]
            assert kw.knows(term) == (term in ref.vocab)


def test_scores_and_top_equal_bm25s_on_english_and_chinese(tmp_path: Path) -> None:
    documents = [keyword_tokens(t) for t in TEXTS]
    kw = Keywords.build(documents, tmp_path / "kw")
    check_same(documents, kw)
    assert kw.top(keyword_tokens("退款"), 1)[0][0] == 2
    reopened = Keywords.open(tmp_path / "kw", len(documents))
    check_same(documents, reopened)


def test_a_larger_index_ranks_as_bm25_within_exact_size_and_beyond(tmp_path: Path) -> None:
    documents = corpus(3000)  # up to EXACT_UP_TO: tantivy returns every matching chunk, rescored
    check_same(documents, Keywords.build(documents, tmp_path / "small"))
    documents = corpus(keywords.EXACT_UP_TO + 2000, seed=2)  # beyond: tantivy's best 4n, rescored
    kw = Keywords.build(documents, tmp_path / "large")
    ref = BM25(documents)
    proofs = 0
    for q in queries():
        best, proven = kw.ranked(q, 5)
        assert best == ref.top(q, 5)  # proven or not (measured at scale: benchmarks/keyword_engine.py)
        proofs += proven
    assert proofs >= 1


def test_the_bound_holds_for_every_chunk(tmp_path: Path) -> None:
    """RATIO bounds our score over tantivy's for every chunk (what `ranked` proves with), lengths 0-300."""
    import tantivy

    rng = random.Random(3)
    words = ["alpha", "beta", "gamma", "delta"] + [f"w{i}" for i in range(50)]
    documents = [[rng.choice(words) for _ in range(rng.choice([0, 1, 2, 5, 30, 60, 120, 300]))] for _ in range(800)]
    kw = Keywords.build(documents, tmp_path / "kw")
    ref = BM25(documents)
    for q in (["alpha"], ["alpha", "beta"], ["w1", "gamma", "delta"]):
        parts = [(tantivy.Occur.Should, tantivy.Query.term_query(kw._index.schema, "t", t, index_option="freq"))
                 for t in q]
        hits = kw._searcher.search(tantivy.Query.boolean_query(parts), len(documents), count=False).hits
        rows = kw._searcher.fast_field_values("row", [address for _, address in hits])
        exact = ref.score_all(q)
        assert sorted(rows) == np.flatnonzero(exact).tolist()
        assert all(exact[row] <= keywords.RATIO * score for (score, _), row in zip(hits, rows, strict=True))


def _damage_cases() -> dict:
    def truncate(name: str):
        def damage(d: Path) -> None:
            data = (d / name).read_bytes()
            (d / name).write_bytes(data[: len(data) // 2])
        return damage

    def rewrite(name: str, change):
        def damage(d: Path) -> None:
            np.save(d / name, change(np.load(d / name)))
        return damage

    return {
        "postings truncated": (truncate("postings.npy"), "keywords/postings.npy: unreadable"),
        "lengths of another type": (rewrite("doc_len.npy", lambda a: a.astype(np.float64)),
                                    "keywords/doc_len.npy: must be 8 values of int32"),
        "offsets falling": (rewrite("start.npy", lambda a: a[::-1].copy()), "keywords/start.npy: offsets must rise"),
        "meta for other chunks": (lambda d: (d / "keywords.json").write_text(json.dumps(
            {**json.loads((d / "keywords.json").read_text()), "rows": 9})), "keywords/keywords.json: not format 1"),
        "meta not JSON": (lambda d: (d / "keywords.json").write_text("{"), "keywords/keywords.json: unreadable"),
        "tantivy index gone": (lambda d: shutil.rmtree(d / "tantivy"), "keywords/tantivy: unreadable"),
        "keyword directory gone": (lambda d: shutil.rmtree(d), "keywords/keywords.json: unreadable"),
    }


@pytest.mark.parametrize("case", list(_damage_cases()))
def test_a_damaged_keyword_index_is_refused_in_one_line_naming_reindex(case: str, tmp_path: Path) -> None:
    damage, message = _damage_cases()[case]
    index = HybridIndex.build(kb_chunks({f"d{i}": TEXTS[i] for i in range(3)}), BowEmbedder())
    assert len(index) == 8
    idx = tmp_path / "idx"
    index.save(idx)
    damage(idx / index_files.KEYWORD_DIR)
    with pytest.raises(IngestError) as err:
        HybridIndex.load(idx, BowEmbedder())
    text = str(err.value)
    assert text.startswith(f"index at {idx} has a damaged keyword index: ") and message in text, text
    assert text.endswith(f"rebuild its keyword index with `selfcrag reindex {idx}` (nothing is embedded again)")
    assert "\n" not in text
    reindex(idx)  # ... which mends it
    assert HybridIndex.load(idx, BowEmbedder()).retrieve("refund", ctx()) == index.retrieve("refund", ctx())


def old_format(idx: Path, legacy_json: bool = False) -> None:
    """Turn a saved index into one as selfcrag saved it before issue 46: format 1, keywords in bm25.npz (or, older
    still, bm25.json), no keywords/."""
    from tests.unit.test_retrieval import legacy_state

    chunks = [json.loads(line) for line in (idx / "chunks.jsonl").read_text().splitlines()]
    from selfcrag.knowledge.documents import Chunk

    bm25 = BM25([keyword_tokens(index_text(Chunk(**c))) for c in chunks])
    shutil.rmtree(idx / index_files.KEYWORD_DIR)
    if legacy_json:
        (idx / "bm25.json").write_text(json.dumps(legacy_state(bm25)))
    else:
        with (idx / "bm25.npz").open("wb") as out:
            np.savez(out, **bm25.to_arrays())  # type: ignore[arg-type]
    manifest = json.loads((idx / "manifest.json").read_text())
    (idx / "manifest.json").write_text(json.dumps({**manifest, "format_version": 1}))


class CountingBow(BowEmbedder):
    calls = 0

    def embed(self, texts):  # type: ignore[no-untyped-def]
        CountingBow.calls += len(texts)
        return super().embed(texts)


@pytest.mark.parametrize("legacy_json", [False, True], ids=["bm25.npz", "bm25.json"])
def test_an_older_index_names_reindex_and_opens_after_it_unchanged(legacy_json: bool, tmp_path: Path) -> None:
    index = HybridIndex.build(kb_chunks({"zh": TEXTS[2]}), BowEmbedder())
    idx = tmp_path / "idx"
    index.save(idx)
    old_format(idx, legacy_json)
    vectors = (idx / "vectors.faiss").read_bytes()
    with pytest.raises(IngestError) as err:
        HybridIndex.load(idx, BowEmbedder())
    assert str(err.value) == (f"index at {idx} was saved by an older selfcrag (keywords in bm25.npz); rebuild its "
                              f"keyword index with `selfcrag reindex {idx}` (nothing is embedded again)")
    CountingBow.calls = 0
    report = reindex(idx)
    assert (report.chunks, report.from_format) == (len(index), 1)
    assert CountingBow.calls == 0 and (idx / "vectors.faiss").read_bytes() == vectors  # nothing re-embedded
    assert not (idx / "bm25.npz").exists() and not (idx / "bm25.json").exists()
    assert json.loads((idx / "manifest.json").read_text())["format_version"] == 2
    loaded = HybridIndex.load(idx, BowEmbedder())
    for q in ("refund policy", "退款多久到账？", "E1042"):
        assert loaded.retrieve(q, ctx()) == index.retrieve(q, ctx())


def test_reindex_refuses_what_it_cannot_mend(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="no index at"):
        reindex(tmp_path / "nowhere")
    index = HybridIndex.build(kb_chunks(), BowEmbedder())
    index.save(tmp_path / "idx")
    (tmp_path / "idx" / "chunks.jsonl").write_text("{not json\n")
    with pytest.raises(IngestError, match=r"damaged beyond its keywords: chunks.jsonl line 1: invalid JSON.*"
                                          r"`selfcrag ingest PATH --index "):
        reindex(tmp_path / "idx")


def test_appends_replacements_and_deletes_keep_bm25s_scores(tmp_path: Path) -> None:
    """The keyword index is rebuilt whole on every save: after an append that adds, replaces and keeps documents,
    and after a delete, it scores as bm25.py over the index's chunks."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, text in enumerate(TEXTS[:4]):
        (folder / f"d{i}.md").write_text(text, encoding="utf-8")
    idx = tmp_path / "idx"
    ingest([folder], idx, embeddings=BowEmbedder())
    (folder / "d1.md").write_text("Error E1042 now means the card expired.", encoding="utf-8")  # replaced
    (folder / "d9.md").write_text(TEXTS[7], encoding="utf-8")  # added
    (folder / "d0.md").unlink()  # not in the sources: kept by an append
    report = ingest([folder], idx, append=True, replace=True, embeddings=BowEmbedder())
    assert (report.added, report.replaced, report.kept) == (1, 1, 1)
    loaded = HybridIndex.load(idx, BowEmbedder())
    documents = [keyword_tokens(index_text(c)) for c in loaded.chunks]
    check_same(documents, loaded._bm25)
    assert loaded.retrieve("E1042 expired", ctx())[0]["text"].startswith("Error E1042 now means")
    gone = loaded.chunks[0].doc_id
    write_documents(idx, [], BowEmbedder(), IngestReport(str(idx)), append=True, remove=[gone])  # a delete
    after = HybridIndex.load(idx, BowEmbedder())
    assert gone not in {c.doc_id for c in after.chunks} and len(after) == len(loaded) - 1
    check_same([keyword_tokens(index_text(c)) for c in after.chunks], after._bm25)
