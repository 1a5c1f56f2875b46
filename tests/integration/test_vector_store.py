"""The knowledge base's VectorStore face (knowledge/langchain_store.py) on both backends, beyond LangChain's standard
suite (test_langchain_standard.py): it writes through ingest's own path (replace by id, nothing embedded twice, a
kill -9 leaves the old or the new), its search is the vector search while the index's retriever stays hybrid, long
documents come back as their chunks, and what it cannot do is refused rather than ignored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, FakeEmbeddings
from support.knowledge_base import new_database

from selfcrag import Context, IngestError, KnowledgeBaseVectorStore, ingest, load_index
from selfcrag.knowledge import pg_schema

SRC = str(Path(__file__).resolve().parents[2] / "src")
HARBOUR = {
    "tides": "The harbour of Quellport has two high tides a day; the highest reaches 7.5 metres.",
    "ferry": "The ferry leaves the harbour of Quellport for Ostholm every 40 minutes.",
    "bridges": "The harbour of Quellport is crossed by four bridges over the river Amsel.",
}


class Counting(DeterministicFakeEmbedding):
    """The suite's fake embeddings, counting the texts it is asked to embed as documents."""

    embedded: int = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return super().embed_documents(texts)


def test_adding_replaces_by_id_and_embeds_only_what_is_new(kb_location: str) -> None:
    embedding = Counting(size=6)
    store = KnowledgeBaseVectorStore(kb_location, embedding=embedding)
    assert store.add_texts(list(HARBOUR.values()), [{"topic": t} for t in HARBOUR], ids=list(HARBOUR)) == list(HARBOUR)
    first = embedding.embedded
    assert first > 0
    store.add_texts(list(HARBOUR.values()), [{"topic": t} for t in HARBOUR], ids=list(HARBOUR))  # unchanged
    assert embedding.embedded == first
    store.add_texts(["The ferry leaves every 30 minutes."], [{"topic": "ferry"}], ids=["ferry"])  # replaced
    assert 0 < embedding.embedded - first <= 3  # the new text and its sentence, nothing of the other two
    store.add_texts([HARBOUR["tides"]], [{"topic": "tides", "checked": True}], ids=["tides"])  # metadata only
    assert [d.page_content for d in store.get_by_ids(["ferry"])] == ["The ferry leaves every 30 minutes."]
    assert store.get_by_ids(["tides"])[0].metadata == {"topic": "tides", "checked": True}
    assert sorted(d.id for d in store.similarity_search("harbour", k=10)) == ["bridges", "ferry", "tides"]


def test_search_is_the_vector_search_and_the_index_retriever_stays_hybrid(kb_location: str) -> None:
    """The store answers the k nearest chunks whatever they are; the index's retriever fuses keywords and drops
    chunks below the similarity gate, so an unrelated question gets nothing from it."""
    store = KnowledgeBaseVectorStore(kb_location)  # the local model, as `ingest` and `load_index` default to
    store.add_documents([Document(page_content=text, id=doc_id) for doc_id, text in HARBOUR.items()])
    unrelated = "Who painted the Mona Lisa?"
    assert len(store.similarity_search(unrelated, k=3)) == 3
    assert load_index(kb_location).as_retriever(k=3).invoke(unrelated) == []
    found = store.similarity_search_with_score("How often does the ferry go to Ostholm?", k=3)
    assert found[0][0].id == "ferry" and [s for _, s in found] == sorted((s for _, s in found), reverse=True)
    assert [d.id for d in store.as_retriever(search_kwargs={"k": 1}).invoke("bridges over the Amsel")] == ["bridges"]
    hybrid = load_index(kb_location).as_retriever(k=1).invoke("bridges over the Amsel")
    assert [d.metadata["doc_id"] for d in hybrid] == ["bridges"]


def test_mmr_trades_a_near_copy_for_something_else(kb_location: str) -> None:
    store = KnowledgeBaseVectorStore(kb_location, embedding=DeterministicFakeEmbedding(size=6))
    copy = "The ferry leaves every 40 minutes."
    store.add_texts([copy, copy, "The bridges are closed on Sundays."], ids=["ferry", "ferry-copy", "bridges"])
    assert {d.id for d in store.similarity_search(copy, k=2)} == {"ferry", "ferry-copy"}
    varied = store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "lambda_mult": 0.25}).invoke(copy)
    assert varied[0].id in {"ferry", "ferry-copy"} and varied[1].id == "bridges"
    only = store.max_marginal_relevance_search(copy, k=3, fetch_k=1)  # k taken from the fetch_k nearest
    assert len(only) == 1 and only[0].id in {"ferry", "ferry-copy"}


def test_a_long_document_comes_back_as_its_chunks_and_goes_as_a_whole(kb_location: str) -> None:
    store = KnowledgeBaseVectorStore(kb_location, embedding=DeterministicFakeEmbedding(size=6))
    long_text = " ".join(f"Sentence number {n} of the long harbour report says something new." for n in range(80))
    metadata = {"author": "harbour office", "pages": [1, 2], "nested": {"year": 2026}}
    store.add_documents([Document(page_content=long_text, metadata=metadata, id="report"),
                         Document(page_content="A short note.", id="note")])
    chunks = store.get_by_ids(["report"])
    assert len(chunks) > 2 and {d.id for d in chunks} == {"report"}
    assert all(d.metadata == metadata for d in chunks)
    assert chunks[0].page_content.startswith("Sentence number 0 ") and "number 79 " in chunks[-1].page_content
    vector = DeterministicFakeEmbedding(size=6).embed_query(chunks[1].page_content)
    assert store.similarity_search_by_vector(vector, k=1) == [chunks[1]]
    store.delete(["report", "never-added"])
    assert store.get_by_ids(["report"]) == []
    assert [d.id for d in store.similarity_search("harbour", k=10)] == ["note"]
    store.delete(["note"])  # the last one: the knowledge base is empty (a directory holds no index), and usable
    assert store.similarity_search("harbour", k=10) == [] and store.get_by_ids(["note"]) == []
    store.add_texts(["Back again."], ids=["again"])
    assert [d.id for d in store.similarity_search("harbour", k=10)] == ["again"]


def test_documents_ingested_from_files_read_through_the_store_and_its_documents_reach_the_graph(
        kb_location: str, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "tides.md").write_text(f"# Tides\n\n{HARBOUR['tides']}", encoding="utf-8")
    ingest(folder, kb_location)
    store = KnowledgeBaseVectorStore(kb_location)
    assert store.get_by_ids(["tides"]) == [Document(page_content=f"# Tides\n\n{HARBOUR['tides']}", id="tides",
                                                    metadata={"title": "Tides", "source": "docs/tides.md"})]
    store.add_documents([Document(page_content=HARBOUR["ferry"], metadata={"title": "Ferry"}, id="ferry")])
    passages = load_index(kb_location).retrieve("How often does the ferry leave for Ostholm?", Context(k=2))
    assert passages[0]["doc_id"] == "ferry" and passages[0]["title"] == "Ferry"


def test_another_embedding_is_refused_in_one_line(kb_location: str) -> None:
    KnowledgeBaseVectorStore(kb_location, embedding=DeterministicFakeEmbedding(size=6)).add_texts(["foo"])
    with pytest.raises(IngestError, match="DeterministicFakeEmbedding.*FakeEmbeddings") as refused:
        KnowledgeBaseVectorStore(kb_location, embedding=FakeEmbeddings(size=6))
    assert "\n" not in str(refused.value)
    same_name = KnowledgeBaseVectorStore(kb_location, embedding=DeterministicFakeEmbedding(size=8))
    with pytest.raises(IngestError, match="holds 6-dimensional vectors but the embeddings give 8-dimensional"):
        same_name.add_texts(["bar"])  # the name is the same, the size is not: refused before anything is written
    with pytest.raises(IngestError):
        same_name.similarity_search("foo", k=1)
    assert [d.page_content for d in KnowledgeBaseVectorStore(kb_location, embedding=DeterministicFakeEmbedding(
        size=6)).similarity_search("foo", k=5)] == ["foo"]


def test_what_it_cannot_do_is_refused_not_ignored(kb_location: str) -> None:
    store = KnowledgeBaseVectorStore(kb_location, embedding=DeterministicFakeEmbedding(size=6))
    store.add_texts(["foo"], ids=["1"])
    with pytest.raises(ValueError, match=r"\$ne is not supported"):  # a filter it cannot apply (metadata_filter.py)
        store.similarity_search("foo", k=1, filter={"id": {"$ne": 1}})
    with pytest.raises(TypeError, match="takes no fetch"):
        store.similarity_search("foo", k=1, fetch=3)
    with pytest.raises(IngestError, match="ids of the documents"):
        store.delete()
    with pytest.raises(IngestError, match="metadata must be JSON"):
        store.add_texts(["bar"], [{"when": object()}])
    with pytest.raises(IngestError, match="has no text"):
        store.add_texts(["  "])
    with pytest.raises(TypeError, match="location="):
        KnowledgeBaseVectorStore.from_texts(["foo"], DeterministicFakeEmbedding(size=6))
    assert [d.id for d in store.similarity_search("foo", k=5)] == ["1"]


def test_both_backends_find_the_same_neighbours(pgvector_url: str, tmp_path: Path) -> None:
    texts = [f"Note {n}: the harbour office opens gate {n} at {n % 12} o'clock." for n in range(40)]
    found = []
    for location in (str(tmp_path / "index"), new_database(pgvector_url)):
        store = KnowledgeBaseVectorStore.from_texts(texts, DeterministicFakeEmbedding(size=6), location=location,
                                                    ids=[f"n{i}" for i in range(40)])
        found.append([(d.id, round(s, 4)) for d, s in store.similarity_search_with_score("gate 7", k=10)])
    assert found[0] == found[1] and len(found[0]) == 10


def test_a_version_1_knowledge_base_still_searches_and_the_store_upgrades_it(pgvector_url: str) -> None:
    url = new_database(pgvector_url)
    embedding = DeterministicFakeEmbedding(size=6)
    ingest([Document(page_content=text, id=doc_id) for doc_id, text in HARBOUR.items()], url, embeddings=embedding)
    with psycopg.connect(url, autocommit=True) as conn:  # as a selfcrag of schema version 1 left it
        conn.execute("ALTER TABLE selfcrag_kb_chunks DROP COLUMN metadata CASCADE")  # with version 4's JSONB of it
        conn.execute("UPDATE selfcrag_kb_meta SET value = '1' WHERE name = 'version'")
    found = load_index(url, embedding).retrieve(HARBOUR["ferry"], Context(k=2))  # searching never needed it
    assert found[0]["doc_id"] == "ferry"
    store = KnowledgeBaseVectorStore(url, embedding=embedding)
    assert store.get_by_ids(["ferry"])[0].metadata == {"title": "ferry", "source": "ferry"}
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT value FROM selfcrag_kb_meta WHERE name = 'version'").fetchone() == (
            str(pg_schema.SCHEMA_VERSION),)


# A process that adds to a store and SIGKILLs itself at the Nth call of one step of the write: a directory save's
# file writes and renames (atomic_dir), or PostgreSQL's removal of a replaced document's old rows (inside the
# batch's transaction).
KILLED_ADD = """
import os, signal, sys
from langchain_core.embeddings import DeterministicFakeEmbedding
from selfcrag import KnowledgeBaseVectorStore
from selfcrag.knowledge import index_files, pg_ingest

location, step, stop = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = [0]
def dying(run):
    def wrapped(*args, **kwargs):
        result = run(*args, **kwargs)
        calls[0] += 1
        if calls[0] == stop:
            os.kill(os.getpid(), signal.SIGKILL)
        return result
    return wrapped
if step == "rename":
    os.rename = dying(os.rename)
elif step == "write":
    index_files._write = dying(index_files._write)
else:
    pg_ingest._remove = dying(pg_ingest._remove)
store = KnowledgeBaseVectorStore(location, embedding=DeterministicFakeEmbedding(size=6))
store.add_texts(["The new tide table.", "A new document."], [{"v": "new"}, {"v": "new"}], ids=["tides", "added"])
"""


@pytest.mark.parametrize(("backend", "step", "stop", "expected"), [
    ("directory", "write", 1, "old"),  # the new index half written beside the old one
    ("directory", "rename", 1, "old"),  # between the two renames: the old index is put back
    ("directory", "rename", 2, "new"),  # swapped in, not yet cleaned up
    ("postgres", "remove", 1, "old"),  # inside the batch's transaction: rolled back
])
def test_kill_9_during_an_add_leaves_the_old_or_the_new_knowledge_base(
        backend: str, step: str, stop: int, expected: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    location = str(tmp_path / "index") if backend == "directory" else new_database(
        request.getfixturevalue("pgvector_url"))
    embedding = DeterministicFakeEmbedding(size=6)
    KnowledgeBaseVectorStore(location, embedding=embedding).add_texts(
        ["The old tide table.", "Ferries leave hourly."], [{"v": "old"}, {"v": "old"}], ids=["tides", "ferry"])
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", KILLED_ADD, location, step, str(stop)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == -9, done.stderr[-2000:]
    store = KnowledgeBaseVectorStore(location, embedding=embedding)
    held = {d.id: d.metadata["v"] for d in store.get_by_ids(["tides", "ferry", "added"])}
    assert held == ({"tides": "old", "ferry": "old"} if expected == "old" else
                    {"tides": "new", "ferry": "old", "added": "new"})
    store.add_texts(["Another."], ids=["another"])  # and it takes the next write
    assert store.get_by_ids(["another"])
