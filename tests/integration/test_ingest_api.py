"""`selfcrag.ingest`, `--append`, `load_index(...).as_retriever()` and `LocalEmbeddings`, with the real local model:
as a LangChain user or the CLI's user meets them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from support.pdf import write_pdf
from support.quellport import BRIDGES, BRIDGES_NOW, FERRY, TIDES, Counting, folder

from selfcrag import Context, LocalEmbeddings, ask, build_graph, ingest, load_index
from selfcrag.errors import IngestError
from selfcrag.knowledge.embeddings import LangChainEmbedder, default_embedder
from selfcrag.knowledge.retrieval import HybridIndex

LIGHTHOUSE = "# Lighthouse\n\nThe Quellport lighthouse is open to visitors on Sundays from May to September."


def top(index: HybridIndex, query: str) -> str:
    (doc,) = index.as_retriever(k=1).invoke(query)
    return doc.metadata["doc_id"]


def test_append_embeds_only_new_and_changed_documents_and_equals_a_rebuild(tmp_path: Path) -> None:
    docs = folder(tmp_path / "docs", {"tides.md": TIDES, "bridges.md": BRIDGES})
    index_dir = tmp_path / "index"
    first = ingest(docs, index_dir, embeddings=Counting())
    assert (first.documents, first.added, first.reused, first.replaced_index) == (2, 2, 0, False)

    folder(docs, {"bridges.md": BRIDGES_NOW, "ferry.md": FERRY})  # one changed, one new, tides.md as it was
    counting = Counting()
    report = ingest(docs, index_dir, append=True, embeddings=counting)

    assert (report.documents, report.added, report.replaced, report.unchanged, report.kept) == (3, 1, 1, 1, 0)
    assert report.embedded == len(set(counting.texts)) > 0 and report.reused > 0
    assert not [t for t in counting.texts if "tide" in t.lower()]  # the unchanged document: nothing embedded
    assert any("five bridges" in t for t in counting.texts) and any("Ostholm" in t for t in counting.texts)

    # Only the lighthouse is named: the three others stay, and only its texts are embedded.
    counting = Counting()
    lighthouse = Document(page_content=LIGHTHOUSE, id="lighthouse", metadata={"title": "Lighthouse"})
    report = ingest([lighthouse], index_dir, append=True, embeddings=counting)
    assert (report.added, report.kept, report.documents) == (1, 3, 1)
    assert counting.texts and all("ighthouse" in t or "Sundays" in t or "May" in t for t in counting.texts)

    appended = HybridIndex.load(index_dir, default_embedder())
    assert {c.doc_id for c in appended.chunks} == {"tides", "bridges", "ferry", "lighthouse"}
    assert not [c for c in appended.chunks if "four bridges" in c.text]  # the old version is gone
    for query, doc_id in [("How high is the highest tide?", "tides"), ("How many bridges cross the Amsel?",
                          "bridges"), ("How often does the ferry to Ostholm leave?", "ferry"),  # fmt: skip
                          ("When can I visit the lighthouse?", "lighthouse")]:
        assert top(appended, query) == doc_id

    # The same documents indexed from scratch retrieve the same chunks with the same scores.
    rebuilt = tmp_path / "rebuilt"
    ingest([docs / "tides.md", docs / "bridges.md", docs / "ferry.md", lighthouse], rebuilt)
    fresh = HybridIndex.load(rebuilt, default_embedder())
    for query in ("bridges over the Amsel", "ticket price", "visitors on Sundays", "tides in March"):
        got = {(d.metadata["doc_id"], d.metadata["score"]) for d in appended.as_retriever(k=3).invoke(query)}
        assert got == {(d.metadata["doc_id"], d.metadata["score"]) for d in fresh.as_retriever(k=3).invoke(query)}


class InContext(Counting):
    """The local model reading chunks in context (late chunking), recording the chunks it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[str] = []

    def embed_in_context(self, inputs, parts):  # noqa: ANN001, ANN201
        self.inputs += inputs
        return self.inner.embed_in_context(inputs, parts)


def test_append_in_context_runs_only_new_chunks_and_unchanged_ones_keep_their_vectors(tmp_path: Path) -> None:
    from selfcrag.knowledge.vector_store import KEYS_FILE, VECTORS_FILE, evidence_texts, key

    docs = folder(tmp_path / "docs", {"tides.md": TIDES, "bridges.md": BRIDGES})
    index_dir = tmp_path / "index"
    ingest(docs, index_dir, embeddings=InContext())
    before = dict(zip(map(bytes, np.load(index_dir / KEYS_FILE)), np.load(index_dir / VECTORS_FILE), strict=True))

    folder(docs, {"bridges.md": BRIDGES_NOW, "ferry.md": FERRY})
    model = InContext()
    report = ingest(docs, index_dir, append=True, embeddings=model)
    assert (report.added, report.replaced, report.unchanged) == (1, 1, 1)
    assert model.inputs and not [t for t in model.inputs if "tide" in t.lower()]  # the unchanged chunk: not run
    assert model.texts == []  # every sentence and strip of the new chunks came from their pass
    after = dict(zip(map(bytes, np.load(index_dir / KEYS_FILE)), np.load(index_dir / VECTORS_FILE), strict=True))
    tides = [c.text for c in HybridIndex.load(index_dir, default_embedder()).chunks if c.doc_id == "tides"]
    kept = [key(t) for t in evidence_texts(tides)]
    assert kept and all(np.array_equal(before[k], after[k]) for k in kept)  # bit for bit


def test_index_as_a_langchain_retriever_in_a_chain_sync_and_async(tmp_path: Path) -> None:
    docs = folder(tmp_path / "docs", {"tides.md": TIDES, "ferry.md": FERRY})
    (docs / "fares.csv").write_text("route,fare\nOstholm,4.20 euros\nSundholm,6.80 euros\n", encoding="utf-8")
    (docs / "harbour.html").write_text("<title>Harbour</title><script>x()</script><p>The harbour master is "
                                       "Ines Varga.</p>", encoding="utf-8")  # fmt: skip
    report = ingest(docs, tmp_path / "index", embeddings=LocalEmbeddings())
    assert report.documents == 5 and not report.skipped

    retriever = load_index(tmp_path / "index").as_retriever(k=2)
    assert isinstance(retriever, BaseRetriever)
    found = retriever.invoke("Who is the harbour master?")
    assert 1 <= len(found) <= 2 and found[0].metadata["doc_id"] == "harbour"
    assert set(found[0].metadata) == {"id", "doc_id", "chunk_index", "title", "source", "score"}
    assert found[0].metadata["title"] == "Harbour" and found[0].id == "harbour#0"
    (fare,) = asyncio.run(retriever.ainvoke("What does the fare to Sundholm cost?"))[:1]
    assert fare.metadata["doc_id"] == "fares/row-2" and "6.80" in fare.page_content

    chain = retriever | RunnableLambda(lambda found: "\n\n".join(d.page_content for d in found))
    assert "7.5 metres" in chain.invoke("How high is the highest tide?")

    # Ingested with LocalEmbeddings, the index is the default embeddings' own: the graph answers from it.
    result = ask("How high is the highest tide of the year?",
                 compiled_graph=build_graph(settings=Context(index_dir=str(tmp_path / "index"))))
    assert "7.5" in result["answer"] and result["citations"][0]["doc_id"] == "tides"


def test_local_embeddings_in_a_langchain_vector_store() -> None:
    embeddings = LocalEmbeddings()
    vector = embeddings.embed_query("refund")
    assert len(vector) == 384 and all(type(x) is float for x in vector)
    store = InMemoryVectorStore(embedding=embeddings)
    store.add_texts(["Refunds take five days.", "Express shipping costs 12 dollars.", "Gift cards never expire."])
    (hit,) = store.similarity_search("How long until I get my money back?", k=1)
    assert hit.page_content == "Refunds take five days."


def test_bad_targets_fail_in_one_line_before_anything_is_embedded(tmp_path: Path) -> None:
    docs = folder(tmp_path / "docs", {"tides.md": TIDES})
    counting = Counting()
    with pytest.raises(IngestError, match="holds files that are not an index's"):
        ingest(docs, docs, embeddings=counting)  # --index pointed at the documents by mistake
    assert counting.texts == []

    ingest(docs, tmp_path / "index")
    other = LangChainEmbedder(LocalEmbeddings())  # the same vectors under another name: not this index's model
    with pytest.raises(IngestError, match="was built with embedder 'all-MiniLM-L6-v2/onnx-int8' but the current "
                       "embedder is 'langchain/LocalEmbeddings'"):
        ingest(docs, tmp_path / "index", append=True, embeddings=other)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "selfcrag.cli", *args], capture_output=True, text=True, timeout=300)


def test_cli_append_adds_and_a_plain_ingest_says_it_replaces(tmp_path: Path) -> None:
    docs = folder(tmp_path / "docs", {"tides.md": TIDES})
    index = tmp_path / "index"
    proc = run("ingest", str(docs), "--index", str(index), "--append")  # nothing there yet: a new index
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith(f"indexed 1 documents (1 added, 0 replaced, 0 unchanged; 0 others kept) as 1 "
                                  f"chunks into {index}")

    more = folder(tmp_path / "more", {"ferry.md": FERRY, "bridges.md": BRIDGES})
    proc = run("ingest", str(more), "--index", str(index), "--append")
    assert proc.returncode == 0, proc.stderr
    assert "(2 added, 0 replaced, 0 unchanged; 1 others kept) as 3 chunks" in proc.stdout
    proc = run("ask", "How often does the ferry leave?", "--index", str(index), "--json")
    assert json.loads(proc.stdout)["citations"][0]["doc_id"] == "ferry"

    proc = run("ingest", str(more), "--index", str(index))
    assert proc.returncode == 0
    assert proc.stderr.splitlines() == [f"selfcrag: replaced the index at {index} (--append adds to it instead)"]
    assert proc.stdout.startswith("indexed 2 documents as 2 chunks")


def test_a_damaged_hash_file_costs_a_warning_and_no_embedding(tmp_path: Path, caplog) -> None:  # noqa: ANN001
    docs = folder(tmp_path / "docs", {"tides.md": TIDES, "ferry.md": FERRY})
    ingest(docs, tmp_path / "index")
    (tmp_path / "index" / "documents.json").write_text("{not json", encoding="utf-8")

    counting = Counting()
    report = ingest(docs, tmp_path / "index", append=True, embeddings=counting)
    assert (report.replaced, report.unchanged) == (2, 0)  # without hashes nothing is known to be unchanged ...
    assert counting.texts == [] and report.reused > 0  # ... but every text still has its vector
    assert "ignoring documents.json" in caplog.text
    assert ingest(docs, tmp_path / "index", append=True).unchanged == 2  # the append wrote the hashes again


def test_a_pdf_answer_cites_the_page_it_came_from(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write_pdf(docs / "manual.pdf", ["Setup", "Plug the charger into a wall socket before the first use."], "Manual",
              ["Warranty", "The warranty on the Quellport kettle lasts two", "years from the day of delivery."],
              ["Batteries", "The remote control takes two AAA batteries."])
    ingest(docs, tmp_path / "index", embeddings=LocalEmbeddings())
    result = ask("How long does the warranty on the kettle last?",
                 compiled_graph=build_graph(settings=Context(index_dir=str(tmp_path / "index"))))
    assert result["decision"] in ("answer", "answer_with_caveat")
    # The sentence the PDF wrapped over two lines is quoted as one line, without the heading above it, and its
    # citation names its page.
    assert result["answer"].startswith("The warranty on the Quellport kettle lasts two years from the day of delivery.")
    assert [(c["doc_id"], c["source"]) for c in result["citations"]] == [("manual/page-2", "docs/manual.pdf#page=2")]


def test_two_folders_readmes_both_stay_and_a_replace_from_another_source_needs_the_flag(tmp_path: Path) -> None:
    alpha = folder(tmp_path / "coll" / "alpha", {"README.md": TIDES})
    beta = folder(tmp_path / "coll" / "beta", {"README.md": FERRY})
    index = tmp_path / "x"
    assert run("ingest", str(alpha), "--index", str(index)).returncode == 0
    proc = run("ingest", str(beta), "--index", str(index), "--append")
    assert proc.returncode == 0, proc.stderr
    assert "(1 added, 0 replaced, 0 unchanged; 1 others kept)" in proc.stdout
    assert proc.stderr.splitlines() == ["selfcrag: beta/README.md goes in as 'beta/README': the index holds "
                                        "'README' from alpha/README.md (--replace replaces that instead)"]
    sources = {c.doc_id: c.source for c in HybridIndex.load(index, default_embedder()).chunks}
    assert sources == {"README": "alpha/README.md", "beta/README": "beta/README.md"}

    again = ingest(beta, index, append=True, embeddings=Counting())  # the same folder again: nothing changes
    assert (again.added, again.replaced, again.unchanged, again.kept, again.embedded) == (0, 0, 1, 1, 0)

    gamma = folder(tmp_path / "coll" / "gamma", {"README.md": BRIDGES})
    proc = run("ingest", str(gamma), "--index", str(index), "--append", "--replace")
    assert proc.returncode == 0, proc.stderr
    assert "(0 added, 1 replaced, 0 unchanged; 1 others kept)" in proc.stdout
    assert proc.stderr.splitlines() == [
        "selfcrag: gamma/README.md replaces document 'README' from alpha/README.md (--replace)",
        "selfcrag: replaced with their new versions: 'README'"]
    sources = {c.doc_id: c.source for c in HybridIndex.load(index, default_embedder()).chunks}
    assert sources == {"README": "gamma/README.md", "beta/README": "beta/README.md"}

    proc = run("ingest", str(beta), "--index", str(index), "--replace")
    assert proc.returncode == 2 and proc.stderr.startswith("selfcrag: error: --replace goes with --append"), proc


def test_a_clash_with_no_free_qualified_id_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    index = tmp_path / "x"
    taken = Document(page_content=BRIDGES, id="beta/README", metadata={"source": "notes.txt"})
    ingest([folder(tmp_path / "alpha", {"README.md": TIDES}), taken], index, embeddings=Counting())
    before = (index / "chunks.jsonl").read_bytes()
    with pytest.raises(IngestError) as caught:
        ingest(folder(tmp_path / "beta", {"README.md": FERRY}), index, append=True, embeddings=Counting())
    assert str(caught.value) == ("beta/README.md: its id 'README' is held by alpha/README.md and 'beta/README' by "
                                 "notes.txt; --replace replaces alpha/README.md with it")
    assert (index / "chunks.jsonl").read_bytes() == before

    # A folder of the same name elsewhere gives the same source: an update, and named as one.
    report = ingest(folder(tmp_path / "elsewhere" / "alpha", {"README.md": FERRY}), index, append=True,
                    embeddings=Counting())
    assert (report.replaced, report.replaced_ids, report.clashes) == (1, ["README"], [])
