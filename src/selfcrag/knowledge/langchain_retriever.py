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
from selfcrag.knowledge.metadata_filter import MetadataFilter, parse, parsed_metadata

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
    where: Any = None  # MetadataFilter | None: only documents whose metadata matches it (metadata_filter.py)

    def model_post_init(self, __context: Any) -> None:
        self.settings = (self.settings or Context.from_env()).model_copy(update={"k": _positive(self.k)})

    @classmethod
    def of(cls, index: HybridIndex, k: int, settings: Context | None = None,
           search_kwargs: dict[str, Any] | None = None) -> IndexRetriever:
        """`search_kwargs` as LangChain's VectorStoreRetriever takes them: `k` (overrides `k`) and `filter`."""
        search_kwargs = dict(search_kwargs or {})
        unknown = sorted(set(search_kwargs) - {"k", "filter"})
        if unknown:
            raise ValueError(f"search_kwargs {', '.join(unknown)} not supported; this retriever takes k and filter")
        return cls(index=index, k=_positive(search_kwargs.get("k", k)), settings=settings,
                   where=parse(search_kwargs.get("filter")))

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        """`invoke(query, k=3)` overrides the constructor's k for that call, as LangChain's own retrievers do;
        `invoke(query, filter={...})` narrows the retriever's filter for that call (both must match: a call never
        widens what the retriever was made to return). Each Document's metadata is its document's, with the
        chunk's id, doc_id, chunk_index, title, source and score."""
        settings = self.settings
        if "k" in kwargs:
            settings = settings.model_copy(update={"k": _positive(kwargs["k"])})
        where: MetadataFilter | None = self.where
        if "filter" in kwargs and (narrower := parse(kwargs["filter"])) is not None:
            where = narrower.and_(where)
        passages = self.index.retrieve(query, settings, where) if where is not None else self.index.retrieve(
            query, settings)
        # the documents' own metadata (one lookup for all of them), under the chunk's fields
        kept = {c.doc_id: c.metadata for c in self.index.chunks_of(list({p["doc_id"] for p in passages}))}
        fields = ("id", "doc_id", "chunk_index", "title", "source", "score")
        return [Document(page_content=p["text"], id=p["id"],
                         metadata={**parsed_metadata(kept.get(p["doc_id"], "")), **{name: p[name] for name in fields}})
                for p in passages]
