"""LangChain stores for `retriever_factory` tests, named by import path as an operator names one."""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

POLICIES = ["Refunds are paid within 5 business days of the return arriving.",
            "Standard shipping is free on orders over $50.", "Gift cards never expire."]  # fmt: skip


def policies(embedding: Embeddings, prefix: str = "policy") -> InMemoryVectorStore:
    """A vector store holding three policy sentences, embedded with what the graph hands its `embedding`."""
    store = InMemoryVectorStore(embedding)
    store.add_texts(POLICIES, ids=[f"{prefix}-{i}" for i in range(len(POLICIES))],
                    metadatas=[{"doc_id": f"{prefix}-{i}", "title": f"Policy {i}"} for i in range(len(POLICIES))])
    return store


class FirstTwo(BaseRetriever):
    """A retriever that is no vector store: the first two policies, whatever the query."""

    def _get_relevant_documents(self, query: str, *, run_manager: object) -> list[Document]:
        return [Document(page_content=text, metadata={"doc_id": f"fixed-{i}"}) for i, text in enumerate(POLICIES[:2])]


def not_a_store() -> dict[str, str]:
    return {"what": "a dict"}
