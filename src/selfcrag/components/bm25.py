"""A small Okapi BM25 over pre-tokenised documents (tokens from `text.keyword_tokens`).

An inverted index (term -> [(row, term frequency)]) means a query only touches the documents that share
a term with it. The state is plain lists and dicts, so it round-trips through JSON for persistence.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

FORMAT = 1


class BM25:
    def __init__(self, documents: list[list[str]] | None = None, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self.doc_len: list[int] = []
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for tokens in documents or []:
            self.add(tokens)

    def add(self, tokens: list[str]) -> int:
        """Index one more document; returns its row."""
        row = len(self.doc_len)
        self.doc_len.append(len(tokens))
        for term, tf in Counter(tokens).items():
            self.postings.setdefault(term, []).append((row, tf))
        return row

    def __len__(self) -> int:
        return len(self.doc_len)

    def idf(self, term: str) -> float:
        # The "+1" (Lucene's variant) keeps idf positive: Okapi's original goes negative for a term in more
        # than half the documents, which would punish a chunk for matching a common query word.
        n, df = len(self.doc_len), len(self.postings.get(term, ()))
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def contains(self, term: str, row: int) -> bool:
        return any(r == row for r, _ in self.postings.get(term, ()))

    def scores(self, query_tokens: list[str]) -> dict[int, float]:
        """BM25 score of every document sharing at least one term with the query."""
        if not self.doc_len:
            return {}
        avgdl = max(sum(self.doc_len) / len(self.doc_len), 1e-9)
        out: dict[int, float] = {}
        for term in dict.fromkeys(query_tokens):  # a word repeated in the question counts once
            postings = self.postings.get(term)
            if not postings:
                continue
            idf = self.idf(term)
            for row, tf in postings:
                norm = self.k1 * (1 - self.b + self.b * self.doc_len[row] / avgdl)
                out[row] = out.get(row, 0.0) + idf * tf * (self.k1 + 1) / (tf + norm)
        return out

    def top(self, query_tokens: list[str], n: int) -> list[tuple[int, float]]:
        """The `n` best (row, score) pairs, best first; ties broken by row for determinism."""
        ranked = sorted(self.scores(query_tokens).items(), key=lambda item: (-item[1], item[0]))
        return ranked[: max(n, 0)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "k1": self.k1,
            "b": self.b,
            "doc_len": self.doc_len,
            "postings": {term: [list(p) for p in plist] for term, plist in self.postings.items()},
        }

    @classmethod
    def from_dict(cls, state: Any) -> BM25:
        """The state `to_dict` wrote, checked first: a damaged file gives a ValueError saying where, not a
        KeyError here or an IndexError at the first query that touches a row past the end."""
        if not isinstance(state, dict):
            raise ValueError("expected a JSON object")
        if state.get("format") != FORMAT:
            raise ValueError(f"unsupported BM25 state format {state.get('format')!r}")
        for name, top, wanted in (("k1", math.inf, "a non-negative number"), ("b", 1.0, "a number from 0 to 1")):
            value = state.get(name)  # b > 1 would make long documents score below zero
            number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            if not (number and 0 <= value <= top):  # type: ignore[operator]
                raise ValueError(f'"{name}" must be {wanted}')
        doc_len = state.get("doc_len")
        if not isinstance(doc_len, list) or not all(_count(n) for n in doc_len):
            raise ValueError('"doc_len" must be a list of non-negative integers')
        postings = state.get("postings")
        if not isinstance(postings, dict):
            raise ValueError('"postings" must be an object')
        rows = len(doc_len)
        checked: dict[str, list[tuple[int, int]]] = {}
        for term, plist in postings.items():
            if not isinstance(plist, list):
                raise ValueError(f'"postings" {term!r} must be a list')
            last = -1
            for entry in plist:
                if not (isinstance(entry, list) and len(entry) == 2 and _count(entry[0]) and _count(entry[1])):
                    raise ValueError(f'"postings" {term!r}: {str(entry)[:40]} is not a [row, frequency] pair')
                row, tf = entry
                if row >= rows:
                    raise ValueError(f'"postings" {term!r}: row {row} is out of range ({rows} documents)')
                if row <= last:  # `add` writes rows in ascending order, once each
                    raise ValueError(f'"postings" {term!r}: row {row} is repeated or out of order')
                if tf == 0:
                    raise ValueError(f'"postings" {term!r}: row {row} has frequency 0')
                last = row
            checked[term] = [(row, tf) for row, tf in plist]
        bm25 = cls(k1=float(state["k1"]), b=float(state["b"]))
        bm25.doc_len = list(doc_len)
        bm25.postings = checked
        return bm25


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
