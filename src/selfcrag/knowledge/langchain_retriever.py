"""A selfcrag index as a LangChain `BaseRetriever`: what `HybridIndex.as_retriever()` and
`PgIndex.as_retriever()` return (changed: out of langchain_objects.py, which loads indexes and so sits above
them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from selfcrag.context import Context

if TYPE_CHECKING:
    from selfcrag.knowledge.retrieval import HybridIndex


class IndexRetriever(BaseRetriever):
    """A selfcrag index as a LangChain retriever: the `k` best chunks of a query, best first, as Documents."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any  # HybridIndex (Any: pydantic would try to validate the class)
    settings: Any  # Context with the retriever's k

    @classmethod
    def of(cls, index: HybridIndex, k: int, settings: Context | None = None) -> IndexRetriever:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        return cls(index=index, settings=(settings or Context.from_env()).model_copy(update={"k": k}))

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        """`invoke(query, k=3)` overrides the constructor's k for that call, as LangChain's own retrievers do."""
        settings = self.settings
        if "k" in kwargs:
            k = kwargs["k"]
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise ValueError(f"k must be a positive integer, got {k!r}")
            settings = settings.model_copy(update={"k": k})
        fields = ("id", "doc_id", "chunk_index", "title", "source", "score")
        return [Document(page_content=p["text"], id=p["id"], metadata={name: p[name] for name in fields})
                for p in self.index.retrieve(query, settings)]
