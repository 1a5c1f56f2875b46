"""A retriever over three fixed help-center passages: for tests and benchmarks that exercise model calls, faults
and bounds rather than retrieval."""

from __future__ import annotations

from typing import Any

from selfcrag.contract import Passage


def passage(doc: str, text: str) -> Passage:
    return Passage(id=f"{doc}#0", doc_id=doc, chunk_index=0, title=doc.title(), source=f"{doc}.md", text=text,
                   score=0.8, origin="kb")  # fmt: skip


SHELF = [
    passage("returns", "Most items can be returned within 30 days of delivery. Refunds go to the original card."),
    passage("electronics", "Electronics such as headphones have a shorter return window of 15 days."),
    passage("shipping", "Standard shipping takes 3 to 5 business days. Express shipping takes 1 to 2 days."),
]


class Shelf:
    def retrieve(self, query: str, settings: Any) -> list[Passage]:
        return list(SHELF)
