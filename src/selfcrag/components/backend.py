"""The set of components one graph uses. `offline_components()` is the default: no model, no key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from selfcrag.components.base import (
    AnswerGrader,
    Embedder,
    Generator,
    GroundednessChecker,
    QueryRewriter,
    Refiner,
    RelevanceGrader,
    Retriever,
    WebSearch,
)

if TYPE_CHECKING:
    from selfcrag.context import Context


class LazyEmbedder:
    """The local embedder, loaded on first use: building a graph (or importing selfcrag) stays cheap."""

    def __init__(self, runtime: str | None = None) -> None:
        self._runtime = runtime
        self._embedder: Embedder | None = None

    def _load(self) -> Embedder:
        if self._embedder is None:
            from selfcrag.components.embeddings import default_embedder

            self._embedder = default_embedder(self._runtime)
        return self._embedder

    @property
    def name(self) -> str:
        return self._load().name

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._load().embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._load().embed_query(text)


@dataclass
class Components:
    relevance: RelevanceGrader
    refiner: Refiner
    generator: Generator
    groundedness: GroundednessChecker
    answer_grader: AnswerGrader
    rewriter: QueryRewriter
    web: WebSearch
    retriever: Retriever | None = None  # None: the index named by settings.index_dir, else the bundled sample
    embedder: Embedder | None = None  # builds and reads the default index

    def retriever_for(self, settings: Context) -> Retriever:
        if self.retriever is not None:
            return self.retriever
        from selfcrag.components.retrieval import index_for

        return index_for(settings, self.embedder)


def offline_components(
    retriever: Retriever | None = None, embedder: Embedder | None = None, web: WebSearch | None = None
) -> Components:
    """Deterministic components that need no model: the default when none is configured."""
    from selfcrag.components.extractive import ExtractiveGenerator
    from selfcrag.components.groundedness import OfflineGroundednessChecker
    from selfcrag.components.offline_grading import OfflineAnswerGrader, OfflineRelevanceGrader
    from selfcrag.components.refine import StripRefiner
    from selfcrag.components.rewrite import KeywordRewriter
    from selfcrag.components.web_search import TavilyWebSearch

    shared: Embedder = embedder or LazyEmbedder()
    return Components(
        relevance=OfflineRelevanceGrader(shared),
        refiner=StripRefiner(shared),
        generator=ExtractiveGenerator(shared),
        groundedness=OfflineGroundednessChecker(shared),
        answer_grader=OfflineAnswerGrader(shared),
        rewriter=KeywordRewriter(),
        web=web or TavilyWebSearch(),
        retriever=retriever,
        embedder=shared,
    )
