"""Metadata and metadata filters on both knowledge bases (a directory and PostgreSQL + pgvector): documents keep their
metadata through `ingest` (LangChain Documents, JSONL fields), and a filter is applied inside the search, so k
results come back when only a few chunks match and many better ones do not — through the index, its LangChain
retriever (`search_kwargs={"filter": ...}`), the VectorStore face and a graph run's `tenant` setting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from langchain_core.documents import Document
from support.knowledge_base import new_database

from selfcrag import Context, KnowledgeBaseVectorStore, build_graph, ingest, load_index
from selfcrag.knowledge import pg_schema
from selfcrag.knowledge.metadata_filter import parse
from selfcrag.text.text import keyword_tokens

QUESTION = "How many days is the refund window for returns?"
# Forty documents of one tenant that answer the question closely, three of another that answer it less well.
GLOBEX = [Document(page_content=f"Refund window for returns: a refund is given within {10 + n} days of the "
                   f"return, for order class {n}.", id=f"globex-{n}", metadata={"tenant": "globex", "n": n})
          for n in range(40)]
ACME = [Document(page_content=text, id=f"acme-{n}", metadata={"tenant": "acme", "n": n})
        for n, text in enumerate(["Boots bought from us can be sent back unworn; we pay back in 45 days.",
                                  "Refunds for sandals take 30 days once the parcel is back.",
                                  "Socks are final sale, with no refund."])]


@pytest.fixture
def two_tenants(kb_location: str) -> str:
    ingest([*GLOBEX, *ACME], kb_location)
    return kb_location


def test_k_results_come_back_when_few_match_and_many_better_ones_do_not(two_tenants: str) -> None:
    index = load_index(two_tenants)
    unfiltered = index.retrieve(QUESTION, Context(k=5).model_copy(update={"k": 12}))
    # What a filter after the search would have left: nothing, so a filter inside it is what this test shows.
    assert unfiltered and not [p for p in unfiltered if p["doc_id"].startswith("acme")]
    found = index.retrieve(QUESTION, Context(k=3), parse({"tenant": "acme"}))
    assert sorted(p["doc_id"] for p in found) == ["acme-0", "acme-1", "acme-2"]
    # PostgreSQL's HNSW walk (its iterative scan, then the exact fallback) as a large knowledge base searches
    walked = index.retrieve(QUESTION, Context(k=3, vector_index="hnsw"), parse({"tenant": "acme"}))
    assert sorted(p["doc_id"] for p in walked) == ["acme-0", "acme-1", "acme-2"]
    assert [p["doc_id"] for p in index.retrieve(QUESTION, Context(k=2), parse({"tenant": "acme", "n": {"$in": [1, 2]}}))
            ] in (["acme-1", "acme-2"], ["acme-2", "acme-1"])
    assert index.retrieve(QUESTION, Context(k=3), parse({"tenant": {"$in": []}})) == []
    assert index.retrieve(QUESTION, Context(k=3), parse({"tenant": "nobody"})) == []
    assert index.titles(10, parse({"tenant": "acme"})) == ["acme-0", "acme-1", "acme-2"]
    (sandals,) = keyword_tokens("sandals")
    assert index.knows(sandals, parse({"tenant": "acme"})) and not index.knows(sandals, parse({"tenant": "globex"}))


def test_the_retriever_and_the_vector_store_take_the_filter(two_tenants: str) -> None:
    retriever = load_index(two_tenants).as_retriever(search_kwargs={"k": 3, "filter": {"tenant": "acme"}})
    docs = retriever.invoke(QUESTION)
    assert sorted(d.metadata["doc_id"] for d in docs) == ["acme-0", "acme-1", "acme-2"]
    assert all(d.metadata["tenant"] == "acme" for d in docs)  # the document's own metadata comes back
    # a call's filter narrows the retriever's, never widens it
    assert [d.metadata["doc_id"] for d in retriever.invoke(QUESTION, filter={"n": 1})] == ["acme-1"]
    assert retriever.invoke(QUESTION, filter={"tenant": "globex"}) == []
    store = KnowledgeBaseVectorStore(two_tenants)
    near = store.similarity_search(QUESTION, k=3, filter={"tenant": "acme"})
    assert sorted(d.id for d in near) == ["acme-0", "acme-1", "acme-2"]
    assert near[0].metadata["tenant"] == "acme"
    assert len(store.max_marginal_relevance_search(QUESTION, k=2, fetch_k=3, filter={"tenant": "acme"})) == 2
    with pytest.raises(ValueError, match=r"\$gt is not supported"):
        store.similarity_search(QUESTION, k=3, filter={"n": {"$gt": 1}})
    with pytest.raises(ValueError, match="not supported; this retriever takes k and filter"):
        load_index(two_tenants).as_retriever(search_kwargs={"score_threshold": 0.5})


def test_a_run_with_a_tenant_retrieves_only_that_tenants_documents(two_tenants: str) -> None:
    graph = build_graph(settings={"index_dir": two_tenants})
    result = graph.invoke({"question": QUESTION}, context={"tenant": "acme", "k": 3})
    retrieved = [p["id"] for step in result["trace"] if step["node"] == "retrieve" for p in step["passages"]]
    assert retrieved and all(pid.startswith("acme-") for pid in retrieved)
    assert len([step for step in result["trace"] if step["node"] == "retrieve"][0]["passages"]) == 3
    everyone = graph.invoke({"question": QUESTION}, context={"k": 3})
    assert all(p["id"].startswith("globex-") for step in everyone["trace"] if step["node"] == "retrieve"
               for p in step["passages"])


def test_jsonl_fields_are_metadata_and_documents_without_any_match_no_filter(kb_location: str,
                                                                             tmp_path: Path) -> None:
    corpus = tmp_path / "faq.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a1", "title": "Refunds", "text": "Refunds take 45 days.", "tenant": "acme", "lang": "en"},
        {"id": "g1", "text": "Refunds take 10 days.", "tenant": "globex"},
    ]), encoding="utf-8")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "shared.md").write_text("# Refunds\nRefunds take 3 days everywhere.", encoding="utf-8")
    ingest([corpus, folder], kb_location)
    store = KnowledgeBaseVectorStore(kb_location)
    assert store.get_by_ids(["a1"])[0].metadata == {"title": "Refunds", "tenant": "acme", "lang": "en"}
    found = load_index(kb_location).retrieve("How long do refunds take?", Context(k=5), parse({"lang": "en"}))
    assert [p["doc_id"] for p in found] == ["a1"]
    assert {p["doc_id"] for p in load_index(kb_location).retrieve("How long do refunds take?", Context(k=5))} == {
        "a1", "g1", "shared"}


def test_the_indexers_plain_items_keep_their_other_fields_as_metadata() -> None:
    from selfcrag.indexer import _document

    doc = _document({"id": "r1", "title": "Refunds", "text": "Refunds take 45 days.", "tenant": "acme", "x": None})
    assert doc.metadata == {"title": "Refunds", "tenant": "acme"}


def test_a_knowledge_base_from_before_filters_is_migrated_at_its_first_filtered_search(pgvector_url: str) -> None:
    url = new_database(pgvector_url)
    ingest(ACME, url)
    with psycopg.connect(url, autocommit=True) as conn:  # as schema version 3 left it
        conn.execute("ALTER TABLE selfcrag_kb_chunks DROP COLUMN meta")
        conn.execute("UPDATE selfcrag_kb_meta SET value = '3' WHERE name = 'version'")
    index = load_index(url)
    assert len(index.retrieve(QUESTION, Context(k=3))) == 3  # unfiltered searches never needed it
    assert len(index.retrieve(QUESTION, Context(k=3), parse({"tenant": "acme"}))) == 3
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT value FROM selfcrag_kb_meta WHERE name = 'version'").fetchone() == (
            str(pg_schema.SCHEMA_VERSION),)


def test_each_tenants_folder_is_ingested_with_its_tenant_and_a_run_sees_only_its_own(kb_location: str,
                                                                                     tmp_path: Path) -> None:
    for tenant, days in (("acme", 45), ("globex", 10)):
        folder = tmp_path / tenant
        folder.mkdir()
        (folder / f"{tenant}-returns.md").write_text(f"# Returns\nReturns are refunded within {days} days.",
                                                     encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "selfcrag.cli", "ingest", str(folder), "--index", kb_location,
                               "--append", "--metadata", f"tenant={tenant}"], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
    store = KnowledgeBaseVectorStore(kb_location)
    assert store.get_by_ids(["acme-returns"])[0].metadata == {"tenant": "acme"}
    graph = build_graph(settings={"index_dir": kb_location})
    for tenant in ("acme", "globex"):
        result = graph.invoke({"question": "Within how many days are returns refunded?"}, context={"tenant": tenant})
        found = {p["id"] for step in result["trace"] if step["node"] == "retrieve" for p in step["passages"]}
        assert found == {f"{tenant}-returns#0"}
    bad = subprocess.run([sys.executable, "-m", "selfcrag.cli", "ingest", str(tmp_path / "acme"), "--index",
                          kb_location, "--metadata", "tenant"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "expected KEY=VALUE" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
