"""LangChain's own standard suites (`langchain-tests`): the knowledge base's retriever and its VectorStore face on
both backends (a directory and PostgreSQL + pgvector), and `LocalEmbeddings`. Their async tests run on
pytest-asyncio, which langchain-tests brings (asyncio_mode = auto in pyproject.toml). Nothing is skipped: the
store's async methods are LangChain's defaults over the sync ones, so `has_async` stays on and both run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import (
    EmbeddingsIntegrationTests,
    RetrieversIntegrationTests,
    VectorStoreIntegrationTests,
)
from support.knowledge_base import new_database

from selfcrag import KnowledgeBaseVectorStore, LocalEmbeddings, ingest, load_index
from selfcrag.knowledge.langchain_retriever import IndexRetriever

HARBOUR = {  # five documents about one harbour: a question about it finds at least three
    "tides.md": "# Tides\n\nThe harbour of Quellport has two high tides a day; the highest reaches 7.5 metres.",
    "ferry.md": "# Ferry\n\nThe ferry leaves the harbour of Quellport for Ostholm every 40 minutes.",
    "bridges.md": "# Bridges\n\nThe harbour of Quellport is crossed by four bridges over the river Amsel.",
    "lighthouse.md": "# Lighthouse\n\nThe lighthouse at the harbour of Quellport is open on Sundays.",
    "fish.md": "# Fish market\n\nThe fish market at the harbour of Quellport opens at five in the morning.",
}


def kb_retriever(location: str, k: int = 4) -> BaseRetriever:
    """What a LangChain user writes: the knowledge base at `location` as a retriever of `k` documents."""
    return load_index(location).as_retriever(k=k)


def _build(location: str, root: Path) -> str:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in HARBOUR.items():
        (root / name).write_text(text, encoding="utf-8")
    ingest(root, location)
    return location


class _Standard(RetrieversIntegrationTests):
    location = ""

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return kb_retriever  # type: ignore[return-value]  # called like a class: kb_retriever(**params, k=3)

    @property
    def retriever_constructor_params(self) -> dict:
        return {"location": self.location}

    @property
    def retriever_query_example(self) -> str:
        return "What is at the harbour of Quellport?"


class TestDirectoryRetrieverStandard(_Standard):
    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _knowledge_base(cls, tmp_path_factory: pytest.TempPathFactory) -> None:
        root = tmp_path_factory.mktemp("standard")
        cls.location = _build(str(root / "index"), root / "docs")


class TestPostgresRetrieverStandard(_Standard):
    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _knowledge_base(cls, pgvector_url: str, tmp_path_factory: pytest.TempPathFactory) -> None:
        cls.location = _build(new_database(pgvector_url), tmp_path_factory.mktemp("standard") / "docs")


class TestIndexRetrieverClassStandard(RetrieversIntegrationTests):
    """The class itself, as LangChain's suite builds a retriever: `IndexRetriever(index=..., k=3)`."""

    location = ""

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _knowledge_base(cls, tmp_path_factory: pytest.TempPathFactory) -> None:
        root = tmp_path_factory.mktemp("standard")
        cls.location = _build(str(root / "index"), root / "docs")

    @property
    def retriever_constructor(self) -> type[IndexRetriever]:
        return IndexRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"index": load_index(self.location)}

    @property
    def retriever_query_example(self) -> str:
        return "What is at the harbour of Quellport?"


class TestLocalEmbeddingsStandard(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[LocalEmbeddings]:
        return LocalEmbeddings


class TestDirectoryVectorStoreStandard(VectorStoreIntegrationTests):
    """An empty index directory per test, with the suite's own fake embeddings."""

    @pytest.fixture()
    def vectorstore(self, tmp_path: Path) -> Iterator[VectorStore]:  # type: ignore[override]
        yield KnowledgeBaseVectorStore(tmp_path / "index", embedding=self.get_embeddings())


class TestPostgresVectorStoreStandard(VectorStoreIntegrationTests):
    """A new, empty database per test on the session's PostgreSQL 16 + pgvector."""

    @pytest.fixture()
    def vectorstore(self, pgvector_url: str) -> Iterator[VectorStore]:  # type: ignore[override]
        yield KnowledgeBaseVectorStore(new_database(pgvector_url), embedding=self.get_embeddings())
