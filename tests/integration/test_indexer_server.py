"""The `indexer` graph on a real `langgraph dev` server driven by `langgraph_sdk`: documents a client sends are added
to the operator's index, and the selfcrag graph answers from them on its next run; a server whose operator did not
enable ingestion refuses in one line and writes nothing."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client
from support.langgraph_server import langgraph_dev

from selfcrag import ingest

pytestmark = pytest.mark.system  # a langgraph dev server

TIDES = ("The harbour of Quellport has two high tides a day. The highest tide of the year reaches 7.5 metres in "
         "March.")
START = {"returns.md": "# Returns\n\nMost items can be returned within 30 days of delivery.",
         "shipping.md": "# Shipping\n\nExpress shipping costs 12 dollars and arrives the next working day."}


def make_index(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir(parents=True)
    for name, text in START.items():
        (docs / name).write_text(text, encoding="utf-8")
    ingest(docs, root / "index")
    return root / "index"


def run(client, graph_id: str, **kwargs):  # noqa: ANN001, ANN201
    """One run of the graph; (final status, its output or error payload)."""
    (assistant,) = client.assistants.search(graph_id=graph_id)
    thread = client.threads.create()["thread_id"]
    try:
        started = client.runs.create(thread, assistant["assistant_id"], **kwargs)
    except httpx.HTTPStatusError as exc:  # an operator setting the graph does not publish: refused at the door
        assert client.runs.list(thread) == []
        return "refused", {"__error__": {"error": exc.response.status_code, "message": exc.response.json()["detail"]}}
    output = client.runs.join(thread, started["run_id"])
    return client.runs.get(thread, started["run_id"])["status"], output


def error_text(output) -> str:  # noqa: ANN001
    error = output.get("__error__") if isinstance(output, dict) else None
    return f"{error.get('error')}: {error.get('message')}" if isinstance(error, dict) else str(output)


def snapshot(index: Path) -> dict[str, bytes]:
    # every file, keywords/ and its tantivy files included: "writes nothing" is about the whole directory
    return {str(p.relative_to(index)): p.read_bytes() for p in sorted(index.rglob("*")) if p.is_file()}


def test_enabled_indexer_appends_and_the_graph_answers_from_the_new_document(tmp_path: Path) -> None:
    index = make_index(tmp_path)
    with langgraph_dev({"SELFCRAG_INDEX_DIR": str(index), "SELFCRAG_ALLOW_INGEST": "1"}) as url:
        client = get_sync_client(url=url)
        status, before = run(client, "selfcrag", input={"question": "How high is the highest tide of the year?"})
        assert status == "success" and before["decision"] == "abstain", error_text(before)

        documents = [{"id": "tides", "title": "Tides", "text": TIDES},
                     {"page_content": "The ferry to Ostholm leaves every 40 minutes.", "metadata": {"source": "ferry"}},
                     {"title": "no text"}]  # fmt: skip
        status, output = run(client, "indexer", input={"documents": documents})
        assert status == "success", error_text(output)
        assert {k: output[k] for k in ("indexed", "added", "replaced", "unchanged", "kept", "chunks")} == {
            "indexed": 2, "added": 2, "replaced": 0, "unchanged": 0, "kept": 2, "chunks": 4}
        assert output["skipped"] == ['documents[2]: "text" (or "page_content") must be a string']

        status, after = run(client, "selfcrag", input={"question": "How high is the highest tide of the year?"})
        assert status == "success", error_text(after)
        assert "7.5" in after["answer"] and after["citations"][0]["doc_id"] == "tides"
        status, kept = run(client, "selfcrag", input={"question": "How much does express shipping cost?"})
        assert "12" in kept["answer"] and kept["citations"][0]["doc_id"] == "shipping"

        # The same document again: nothing embedded; the target stays the operator's whatever a run asks.
        status, output = run(client, "indexer", input={"documents": documents[:1]})
        assert (output["unchanged"], output["embedded"]) == (1, 0), error_text(output)
        status, output = run(client, "indexer", input={"documents": documents[:1]},
                             context={"index_dir": str(tmp_path / "elsewhere")})
        assert status == "refused" and "index_dir is an operator setting" in error_text(output)
        assert not (tmp_path / "elsewhere").exists()


def test_indexer_refuses_without_the_operator_switch_and_writes_nothing(tmp_path: Path) -> None:
    index = make_index(tmp_path)
    before = snapshot(index)
    with langgraph_dev({"SELFCRAG_INDEX_DIR": str(index)}) as url:
        client = get_sync_client(url=url)
        status, output = run(client, "indexer", input={"documents": [{"id": "tides", "text": TIDES}]})
        assert status == "error"
        assert "this server does not accept documents" in error_text(output)
        assert "SELFCRAG_ALLOW_INGEST=1" in error_text(output) and "Traceback" not in error_text(output)
        status, output = run(client, "indexer", input={"documents": [{"text": TIDES}]},
                             context={"allow_ingest": True})  # a client cannot switch it on
        assert status == "refused" and "allow_ingest is an operator setting" in error_text(output)
    assert snapshot(index) == before


@pytest.mark.parametrize("documents", [[], "not a list"])
def test_indexer_input_errors_are_one_line(documents) -> None:  # noqa: ANN001
    from selfcrag.errors import IngestError
    from selfcrag.indexer import _documents

    with pytest.raises(IngestError, match=r'the indexer needs "documents": a non-empty list'):
        _documents(documents)
