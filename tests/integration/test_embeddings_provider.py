"""The embeddings setting: OpenAI-compatible embeddings through the real `OpenAIEmbeddings` client against a
local server (tests/support/embeddings_server.py), any LangChain `Embeddings` object, and an index that refuses
embeddings other than the ones that built it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from support.embeddings_server import EmbeddingsServer, vector

from selfcrag import Context, EmbeddingModelError, build_graph, offline_components
from selfcrag.cli import main
from selfcrag.errors import IngestError
from selfcrag.knowledge.documents import chunk_documents, load_documents
from selfcrag.knowledge.embeddings import LangChainEmbedder, embedder_for, openai_embedder
from selfcrag.knowledge.retrieval import HybridIndex

DOCS = {
    "returns.md": "# Returns\n\nMost items can be returned within 30 days of delivery. Electronics have 15 days.",
    "errors.md": "# Error codes\n\nE1042 means your payment was declined by your bank.",
    "zh_returns.md": "# 退货政策\n\n大多数商品的退货期限为签收之日起 30 天。电子产品须在签收后 15 天内寄回。",
}


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def server(monkeypatch):
    with EmbeddingsServer() as running:
        monkeypatch.setenv("OPENAI_BASE_URL", running.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.delenv("OPENAI_API_BASE", raising=False)
        monkeypatch.delenv("SELFCRAG_EMBEDDINGS", raising=False)
        yield running


def test_ingest_and_ask_with_openai_compatible_embeddings(server, docs, tmp_path, capsys):
    index_dir = tmp_path / "index"
    assert main(["ingest", str(docs), "--index", str(index_dir), "--embeddings", "openai:test-embed"]) == 0
    manifest = json.loads((index_dir / "manifest.json").read_text())
    host = server.base_url.split("//")[1].split("/")[0]
    assert manifest["embedder"] == f"langchain/OpenAIEmbeddings/test-embed@{host}"
    assert manifest["dim"] == server.dim
    assert all(body["model"] == "test-embed" for body in server.requests)
    assert any("E1042 means your payment" in text for text in server.texts())  # the chunks went to the server

    # The graph reads the index with the same embeddings, chosen per run by the `embeddings` setting.
    graph = build_graph(offline_components(), settings={"index_dir": str(index_dir), "embeddings": "openai:test-embed"})
    result = graph.invoke({"question": "What does E1042 mean?"})
    assert result["decision"] in ("answer", "answer_with_caveat")
    assert result["citations"][0]["doc_id"] == "errors"
    assert "What does E1042 mean?" in server.texts()  # the question was embedded by the server too

    # A multilingual model reads Chinese, so a Chinese question takes the hybrid path with it.
    result = graph.invoke({"question": "退货期限是多少天？"})
    assert result["citations"][0]["doc_id"] == "zh_returns" and "30" in result["answer"]


def test_an_index_refuses_other_embeddings_with_a_clear_error(server, docs, tmp_path, capsys):
    index_dir = tmp_path / "index"
    assert main(["ingest", str(docs), "--index", str(index_dir), "--embeddings", "openai:test-embed"]) == 0
    capsys.readouterr()
    assert main(["ask", "What does E1042 mean?", "--index", str(index_dir)]) == 1  # local MiniLM
    error = capsys.readouterr().err
    assert "built with embedder 'langchain/OpenAIEmbeddings/test-embed@" in error
    assert "the current embedder is 'all-MiniLM-L6-v2/onnx-int8'" in error and "rebuild it" in error
    with pytest.raises(IngestError, match="built with embedder .*test-embed.* current embedder .*other-model"):
        HybridIndex.load(index_dir, embedder_for("openai:other-model"))


def test_embeddings_setting_comes_from_the_environment_for_ingest(server, docs, tmp_path, monkeypatch):
    monkeypatch.setenv("SELFCRAG_EMBEDDINGS", "openai:env-model")
    assert main(["ingest", str(docs), "--index", str(tmp_path / "index")]) == 0
    assert "openai" in json.loads((tmp_path / "index" / "manifest.json").read_text())["embedder"].lower()
    assert {body["model"] for body in server.requests} == {"env-model"}


def test_a_large_ingest_goes_out_as_bounded_concurrent_requests(server, tmp_path, monkeypatch):
    from selfcrag.knowledge.embeddings import REMOTE_BATCH
    from selfcrag.knowledge.vector_store import key

    monkeypatch.setenv("SELFCRAG_EMBED_CONCURRENCY", "3")
    embedder = openai_embedder("test-embed")
    assert embedder.concurrency == 3
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(60):  # each chunk adds its text, sentences and strips: a few hundred texts
        (folder / f"d{i}.md").write_text(f"# Depot {i}\n\nDepot {i} opens at {i % 12 + 1}. Parcels wait there for "
                                         f"{i} days. The depot is shared.", encoding="utf-8")
    index = HybridIndex.build(chunk_documents(load_documents([folder])), embedder)
    sizes = [len(body["input"]) for body in server.requests]
    assert len(sizes) > 3 and max(sizes) == REMOTE_BATCH
    sent = server.texts()
    assert len(sent) == len(set(sent))  # each distinct text once ("The depot is shared." is in every chunk)
    store = index.text_vectors
    assert store is not None and len(store) == len(sent)
    for text in ("The depot is shared.", "Parcels wait there for 7 days."):
        np.testing.assert_allclose(store.get(key(text)), vector(text, server.dim), atol=1e-6)


class HashedWords(Embeddings):
    """Any LangChain `Embeddings` object: here a hashed bag of words."""

    model = "hashed-words-64"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [vector(t, 64).tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return vector(text, 64).tolist()


def test_any_langchain_embeddings_object_builds_and_reads_an_index(docs, tmp_path):
    embedder = LangChainEmbedder(HashedWords())
    assert embedder.name == "langchain/HashedWords/hashed-words-64"
    index = HybridIndex.build(chunk_documents(load_documents([docs])), embedder)
    index.save(tmp_path / "index")
    graph = build_graph(offline_components(embedder=embedder), settings=Context(index_dir=str(tmp_path / "index")))
    result = graph.invoke({"question": "What does E1042 mean?"})
    assert result["citations"][0]["doc_id"] == "errors"
    with pytest.raises(IngestError, match="built with embedder 'langchain/HashedWords/hashed-words-64'"):
        HybridIndex.load(tmp_path / "index", LangChainEmbedder(HashedWords(), name="langchain/HashedWords/v2"))


def test_query_vectors_of_another_size_are_an_error_not_garbage(docs):
    index = HybridIndex.build(chunk_documents(load_documents([docs])), LangChainEmbedder(HashedWords()))
    index.embedder = LangChainEmbedder(HashedWords(), name="same-name-other-size")
    index.embedder._embeddings.embed_query = lambda text: vector(text, 32).tolist()  # type: ignore[attr-defined]
    with pytest.raises(IngestError, match="32-dimensional vectors but the index holds 64-dimensional"):
        index.retrieve("What does E1042 mean?", Context())


def test_unreachable_or_unconfigured_endpoints_fail_with_one_line(monkeypatch, docs, tmp_path, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    with pytest.raises(EmbeddingModelError, match="need OPENAI_API_KEY"):
        openai_embedder("text-embedding-3-small")
    with pytest.raises(EmbeddingModelError, match="unknown embeddings 'cohere:x'"):
        embedder_for("cohere:x")
    with pytest.raises(ValueError, match="embeddings must be 'local' or 'openai:<model>'"):
        Context(embeddings="openai:")

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens on the discard port
    assert main(["ingest", str(docs), "--index", str(tmp_path / "index"), "--embeddings", "openai:m"]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("selfcrag: error: embeddings langchain/OpenAIEmbeddings/m@127.0.0.1:9 failed")
    assert "\n" not in error
