"""The array BM25: the same scores as the dict-of-lists BM25 it replaced, its file checked before it is believed,
and an index saved with the older `bm25.json` still loading."""

from __future__ import annotations

import io
import json
import math
import random
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from selfcrag.knowledge import index_files
from selfcrag.knowledge.bm25 import ARRAYS, BM25
from selfcrag.text.text import keyword_tokens

TEXTS = [
    "Error E1042 means the card was declined by the bank.",
    "Refunds go back to the original payment method within 5 business days.",
    "Standard shipping takes 3-5 business days; express shipping takes 1-2 business days.",
    "The user user_123 can reset the password from the account page.",
    "Gift cards never expire and cannot be refunded for cash.",
    "",  # an empty chunk: a row with no postings
    "Shipping shipping shipping: a chunk that repeats one word.",
]


def reference_scores(documents: list[list[str]], query: list[str], k1: float = 1.5, b: float = 0.75) -> dict:
    """The previous implementation's arithmetic, term by term in Python: what the arrays must reproduce."""
    postings: dict[str, list[tuple[int, int]]] = {}
    for row, tokens in enumerate(documents):
        for term, tf in Counter(tokens).items():
            postings.setdefault(term, []).append((row, tf))
    doc_len = [len(d) for d in documents]
    avgdl = max(sum(doc_len) / len(doc_len), 1e-9)
    out: dict[int, float] = {}
    for term in dict.fromkeys(query):
        plist = postings.get(term, [])
        if not plist:
            continue
        idf = math.log(1.0 + (len(doc_len) - len(plist) + 0.5) / (len(plist) + 0.5))
        for row, tf in plist:
            norm = k1 * (1 - b + b * doc_len[row] / avgdl)
            out[row] = out.get(row, 0.0) + idf * tf * (k1 + 1) / (tf + norm)
    return out


def random_corpus(seed: int, docs: int = 300, vocabulary: int = 80) -> list[list[str]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocabulary)]
    weights = [1 / (i + 1) for i in range(vocabulary)]  # Zipf-like: a few words everywhere
    return [rng.choices(words, weights, k=rng.randint(0, 40)) for _ in range(docs)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scores_equal_the_previous_implementation_exactly(seed: int) -> None:
    documents = random_corpus(seed)
    bm25 = BM25(documents)
    rng = random.Random(seed + 100)
    for _ in range(50):
        query = rng.choices([f"w{i}" for i in range(90)], k=rng.randint(1, 6))  # some unknown, some repeated
        expected = reference_scores(documents, query)
        assert bm25.scores(query) == expected  # ==, not approx: the same float operations in the same order
        ranked = sorted(expected.items(), key=lambda kv: (-kv[1], kv[0]))
        for n in (1, 3, 10, 1000):
            assert bm25.top(query, n) == ranked[:n]


def test_top_breaks_ties_by_row_at_the_cut() -> None:
    bm25 = BM25([["a"], ["b"], ["a"], ["a"], ["c"]])  # rows 0, 2 and 3 score the same for "a"
    assert [row for row, _ in bm25.top(["a"], 2)] == [0, 2]
    assert [row for row, _ in bm25.top(["a", "c"], 4)] == [4, 0, 2, 3]  # c is rarer
    assert bm25.top(["a"], 0) == [] and bm25.top(["zzz"], 3) == [] and BM25([]).top(["a"], 3) == []


def test_contains_and_idf() -> None:
    bm25 = BM25([keyword_tokens(t) for t in TEXTS])
    assert bm25.contains("e1042", 0) and not bm25.contains("e1042", 1)
    assert bm25.contains("user_123", 3) and not bm25.contains("nothing", 3)
    assert bm25.idf("e1042") > bm25.idf("day") > 0


def saved(tmp_path: Path, arrays: dict[str, np.ndarray]) -> Path:
    with (tmp_path / index_files.KEYWORDS).open("wb") as out:
        np.savez(out, **arrays)
    return tmp_path


def test_arrays_round_trip_through_the_file(tmp_path: Path) -> None:
    bm25 = BM25([keyword_tokens(t) for t in [*TEXTS, "数据 保留 政策"]])
    name, state = index_files.read_keywords(saved(tmp_path, bm25.to_arrays()), ARRAYS)
    restored = BM25.from_arrays(state)
    assert name == index_files.KEYWORDS and restored.terms == bm25.terms
    for query in ("E1042 declined", "shipping business days", "user_123", "数据 保留"):
        assert restored.top(keyword_tokens(query), 5) == bm25.top(keyword_tokens(query), 5)


def test_an_index_saved_with_bm25_json_still_loads(tmp_path: Path) -> None:
    documents = [keyword_tokens(t) for t in TEXTS]
    postings: dict[str, list[list[int]]] = {}
    for row, tokens in enumerate(documents):  # the JSON the previous version wrote
        for term, tf in Counter(tokens).items():
            postings.setdefault(term, []).append([row, tf])
    state = {"format": 1, "k1": 1.5, "b": 0.75, "doc_len": [len(d) for d in documents], "postings": postings}
    (tmp_path / index_files.LEGACY_KEYWORDS).write_text(json.dumps(state))
    name, loaded = index_files.read_keywords(tmp_path, ARRAYS)
    assert name == index_files.LEGACY_KEYWORDS
    old = BM25.from_dict(loaded)
    assert old.scores(keyword_tokens("shipping days")) == BM25(documents).scores(keyword_tokens("shipping days"))


def damaged(arrays: dict[str, np.ndarray], name: str, value: np.ndarray) -> dict[str, np.ndarray]:
    return {**arrays, name: value}


@pytest.mark.parametrize(("damage", "message"), [
    (lambda a: damaged(a, "rows", np.where(a["rows"] == 0, 99, a["rows"]).astype("<i4")), '"rows" holds a row out'),
    (lambda a: damaged(a, "rows", a["rows"][::-1].copy()), '"rows": a row is repeated or out of order'),
    (lambda a: damaged(a, "tf", np.zeros_like(a["tf"])), '"tf" holds a frequency below 1'),
    (lambda a: damaged(a, "doc_len", a["doc_len"] + 1), '"doc_len" does not match'),
    (lambda a: damaged(a, "params", np.asarray([1.5, 2.0])), '"b" must be a number from 0 to 1'),
    (lambda a: damaged(a, "start", a["start"][:-1].copy()), '"start" must hold'),
    (lambda a: damaged(a, "term_bytes", np.full_like(a["term_bytes"], 0xFF)), '"term_bytes" is not UTF-8'),
])
def test_inconsistent_arrays_are_refused_with_the_array_named(damage, message: str) -> None:
    arrays = BM25([keyword_tokens(t) for t in TEXTS]).to_arrays()
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        BM25.from_arrays(damage(arrays))


def test_a_damaged_file_is_refused_before_numpy_allocates(tmp_path: Path) -> None:
    arrays = BM25([keyword_tokens(t) for t in TEXTS]).to_arrays()
    directory = saved(tmp_path, {**arrays, "rows": arrays["rows"].astype("<i8")})
    with pytest.raises(index_files.DamagedFile, match='bm25.npz: "rows" must be a one-dimensional int32 array'):
        index_files.read_keywords(directory, ARRAYS)
    # A header claiming a billion values over a few bytes of data: refused, not allocated.
    lying = io.BytesIO()
    np.lib.format.write_array_header_1_0(lying, {"descr": "<i4", "fortran_order": False, "shape": (10**9,)})
    with zipfile.ZipFile(tmp_path / index_files.KEYWORDS, "w") as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.save(member, array)
            archive.writestr(f"{name}.npy", lying.getvalue() + b"\0" * 8 if name == "rows" else member.getvalue())
    with pytest.raises(index_files.DamagedFile, match='bm25.npz: "rows": 8 bytes of data but its header claims '
                                                     '1,000,000,000 values'):
        index_files.read_keywords(tmp_path, ARRAYS)
    (tmp_path / index_files.KEYWORDS).write_bytes(b"not a zip archive")
    with pytest.raises(index_files.DamagedFile, match="bm25.npz: not a readable archive"):
        index_files.read_keywords(tmp_path, ARRAYS)
    with pytest.raises(index_files.DamagedFile, match='bm25.npz: "tf" is missing'):
        index_files.read_keywords(saved(tmp_path, {k: v for k, v in arrays.items() if k != "tf"}), ARRAYS)


@pytest.mark.parametrize("floor", [0, 40, 4096])  # every path of `top`: sorted postings, index-sized, fallback
def test_pruned_top_equals_ranking_every_score(monkeypatch, floor: int) -> None:
    """`top` prunes common terms (MaxScore); it must return exactly what ranking every row's score returns, ties
    at the cut included, and `score_rows` exactly the scores `score_all` gives those rows."""
    from selfcrag.knowledge import bm25 as module

    monkeypatch.setattr(module, "DIRECT_UP_TO", 0)  # this small corpus would be scored whole
    monkeypatch.setattr(module, "CANDIDATE_FLOOR", floor)
    monkeypatch.setattr(module, "SAMPLE_ROWS", 8)  # a weak threshold on this small corpus: the fallback runs too
    rng = random.Random(floor)
    documents = random_corpus(floor, docs=1500, vocabulary=150)
    documents += [["w0", "w140"]] * 30 + [["w1", "w0", "w140"]] * 30  # many rows tied on the same score
    bm25 = BM25(documents)
    words = [f"w{i}" for i in range(160)]
    for _ in range(120):
        query = rng.choices(words, [1 / (i + 1) for i in range(160)], k=rng.randint(1, 7))
        if rng.random() < 0.2:
            query += ["w140", "w0"]
        dense = bm25.score_all(query)
        for n in (1, 5, 20, 100):
            assert bm25.top(query, n) == BM25.best(dense, n)
        rows = rng.sample(range(len(documents)), 50)
        assert bm25.score_rows(query, rows).tolist() == dense[rows].tolist()
    assert bm25.score_rows(["w0"], []).tolist() == [] and bm25.score_rows(["zzz"], [1, 2]).tolist() == [0.0, 0.0]


def test_accented_words_are_one_token_and_meet_their_unaccented_spelling():
    from selfcrag.text.text import keyword_tokens

    # Before words/3 an accented letter cut the word: "Möngke" was the token "ngke", which "Mongke" never met.
    accented, plain = "Möngke visited Zürich and São Paulo", "Mongke visited Zurich and Sao Paulo"
    assert keyword_tokens(accented) == keyword_tokens(plain)
    assert "mongke" in keyword_tokens("Möngke Khan")
    index = BM25([keyword_tokens("Möngke Khan was the fourth Great Khan."), keyword_tokens("Kublai founded Yuan.")])
    assert index.top(keyword_tokens("Who was Mongke?"), 1)[0][0] == 0  # (row, score): the Möngke passage
