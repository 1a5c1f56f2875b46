"""A selfcrag index as a LangChain `BaseRetriever`: what `HybridIndex.as_retriever()` and
`PgIndex.as_retriever()` return (changed: out of langchain_objects.py, which loads indexes and so sits above
them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from selfcrag.context import Context

if TYPE_CHECKING:
    from selfcrag.knowledge.retrieval import HybridIndex


def _positive(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return k


class IndexRetriever(BaseRetriever):
    """A selfcrag index as a LangChain retriever: the `k` best chunks of a query, best first, as Documents.
    `IndexRetriever(index=..., k=3)` as LangChain's retrievers are built; `settings` (default: the environment's)
    set the fusion weights and the gate. An unknown keyword is an error, not silently ignored."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    index: Any  # HybridIndex (Any: pydantic would try to validate the class)
    k: int = Field(default=4, strict=True)  # strict: True is not a count
    settings: Any = None  # Context; the retriever's k goes into it

    def model_post_init(self, __context: Any) -> None:
        self.settings = (self.settings or Context.from_env()).model_copy(update={"k": _positive(self.k)})

    @classmethod
    def of(cls, index: HybridIndex, k: int, settings: Context | None = None) -> IndexRetriever:
        return cls(index=index, k=_positive(k), settings=settings)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        """`invoke(query, k=3)` overrides the constructor's k for that call, as LangChain's own retrievers do."""
        settings = self.settings
        if "k" in kwargs:
            settings = settings.model_copy(update={"k": _positive(kwargs["k"])})
        fields = ("id", "doc_id", "chunk_index", "title", "source", "score")
        return [Document(page_content=p["text"], id=p["id"], metadata={name: p[name] for name in fields})
                for p in self.index.retrieve(query, settings)]
