"""A knowledge base seen through a metadata filter: what a run with the `tenant` setting searches (backend.searched).

Everything the run learns from the index goes through the filter, not only its passages: the titles a direct reply
names and the vocabulary the router reads (contract.Vocabulary), so one tenant's run never learns another tenant's
document titles or words. Only selfcrag's own indexes can filter inside their search; a caller's retriever cannot
be scoped, and a scoped run on one fails with one line rather than search every document.
"""

from __future__ import annotations

from typing import Any

from selfcrag.context import Context
from selfcrag.contract import Passage
from selfcrag.errors import IngestError
from selfcrag.knowledge.metadata_filter import MetadataFilter


class ScopedIndex:
    """`index` (a HybridIndex or PgIndex) searched only among the chunks matching `where`. Implements `Retriever`
    and `Vocabulary`, and offers the index's `text_vectors` (vectors are not documents: nothing to scope)."""

    def __init__(self, index: Any, where: MetadataFilter) -> None:
        if not getattr(index, "FILTERS_METADATA", False):
            raise IngestError(f"the tenant setting scopes only selfcrag's own indexes, and this run's retriever is a "
                              f"{type(index).__name__}: it cannot filter by metadata, so the run would search every "
                              "tenant's documents")
        self.index = index
        self.where = where
        self.text_vectors = getattr(index, "text_vectors", None)

    def retrieve(self, query: str, settings: Context) -> list[Passage]:
        return list(self.index.retrieve(query, settings, self.where))

    def knows(self, token: str) -> bool:
        return bool(self.index.knows(token, self.where))

    def titles(self, limit: int) -> list[str]:
        return list(self.index.titles(limit, self.where))
