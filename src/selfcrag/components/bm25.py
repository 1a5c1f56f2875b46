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
    def from_dict(cls, state: dict[str, Any]) -> BM25:
        if state.get("format") != FORMAT:
            raise ValueError(f"unsupported BM25 state format {state.get('format')!r}")
        bm25 = cls(k1=float(state["k1"]), b=float(state["b"]))
        bm25.doc_len = [int(n) for n in state["doc_len"]]
        bm25.postings = {term: [(int(r), int(tf)) for r, tf in plist] for term, plist in state["postings"].items()}
        return bm25
