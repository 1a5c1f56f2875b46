"""A LangChain VectorStore named by configuration answers through the graph on a real `langgraph dev`: the operator
sets `SELFCRAG_RETRIEVER_FACTORY=langchain_chroma:Chroma` and its keyword arguments as JSON, and the server searches
a real Chroma collection (langchain-chroma, persisted on disk, embedded with selfcrag's own local embeddings) in
place of the index. A client cannot name a factory of its own: importing one is running code."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client
from support.langgraph_server import langgraph_dev

from selfcrag import LocalEmbeddings
from selfcrag.knowledge.documents import Chunk, chunk_documents, load_documents

pytestmark = pytest.mark.system  # a langgraph dev server

RETURNS = "How many days do I have to return an item?"


def chroma_collection(directory: Path) -> dict[str, Chunk]:
    """Three of the bundled sample's documents, chunked, in a Chroma collection on disk, as an existing store would
    hold them; the chunks by id."""
    from langchain_chroma import Chroma

    with resources.as_file(resources.files("selfcrag") / "data" / "sample_kb") as folder:
        chunks = chunk_documents(load_documents([folder / name for name in ("returns_policy.md", "shipping_rates.md",
                                                                           "warranty.md")]))  # fmt: skip
    store = Chroma(collection_name="policies", persist_directory=str(directory), embedding_function=LocalEmbeddings(),
                   collection_metadata={"hnsw:space": "cosine"})  # fmt: skip
    store.add_texts([c.text for c in chunks], ids=[c.id for c in chunks],
                    metadatas=[{"doc_id": c.doc_id, "chunk_index": c.chunk_index, "title": c.title, "source": c.source}
                               for c in chunks])  # fmt: skip
    return {c.id: c for c in chunks}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("chroma")
    ids = chroma_collection(directory)
    kwargs = {"collection_name": "policies", "persist_directory": str(directory)}
    env = {"SELFCRAG_RETRIEVER_FACTORY": "langchain_chroma:Chroma", "SELFCRAG_RETRIEVER_KWARGS": json.dumps(kwargs)}
    with langgraph_dev(env) as url:
        client = get_sync_client(url=url)
        (assistant,) = client.assistants.search(graph_id="selfcrag")
        yield client, assistant["assistant_id"], ids


def test_a_vector_store_named_by_configuration_answers_through_the_graph(server):
    client, assistant_id, chunks = server
    result = client.runs.wait(None, assistant_id, input={"question": RETURNS})
    assert result["decision"] == "answer" and "30 days" in result["answer"], result
    (retrieved,) = [step for step in result["trace"] if step["node"] == "retrieve"]
    found = [p["id"] for p in retrieved["passages"]]
    assert len(found) == 5 and set(found) <= set(chunks)  # the run's k, all from the Chroma collection
    best = chunks[found[0]]
    assert "30 days" in best.text and retrieved["passages"][0]["score"] > 0.5  # its relevance score, kept
    assert {c["doc_id"] for c in result["citations"]} == {best.doc_id}
    fewer = client.runs.wait(None, assistant_id, input={"question": RETURNS}, context={"k": 2})
    assert [len(s["passages"]) for s in fewer["trace"] if s["node"] == "retrieve"] == [2]


def test_a_run_cannot_name_a_factory_of_its_own(server):
    client, assistant_id, _ = server
    thread = client.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:  # at the door: neither setting is published
        client.runs.create(thread, assistant_id, input={"question": RETURNS},
                           context={"retriever_factory": "os:system", "retriever_kwargs": {"command": "true"}})
    assert refused.value.response.status_code == 403 and client.runs.list(thread) == []
    assert refused.value.response.json()["detail"].startswith("retriever_factory, retriever_kwargs are operator "
                                                              "settings")
