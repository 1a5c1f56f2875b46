"""Two real `langgraph dev` servers on one PostgreSQL (knowledge base and store): a document a third process ingests
after they started is found by both at their next question (issue 25's done-when)."""

from __future__ import annotations

import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client
from support.knowledge_base import new_database
from support.langgraph_server import langgraph_dev

from selfcrag import ingest

pytestmark = pytest.mark.system  # PostgreSQL + pgvector and langgraph dev servers

START = {"returns.md": "# Returns\n\nMost items can be returned within 30 days of delivery.",
         "shipping.md": "# Shipping\n\nExpress shipping costs 12 dollars and arrives the next working day."}
TIDES = "# Tides\n\nThe harbour of Quellport has two high tides a day. The highest tide of the year reaches 7.5 metres."


def asked(url: str, question: str) -> dict:
    client = get_sync_client(url=url)
    (assistant,) = client.assistants.search(graph_id="selfcrag")
    output = client.runs.wait(None, assistant["assistant_id"], input={"question": question})
    assert isinstance(output, dict) and "decision" in output, output
    return output


def test_two_servers_answer_from_documents_a_third_process_ingested_after_they_started(pgvector_url: str,
                                                                                      tmp_path: Path) -> None:
    database = new_database(pgvector_url)
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in START.items():
        (docs / name).write_text(text, encoding="utf-8")
    ingest(docs, database)
    shared = {"SELFCRAG_INDEX_DIR": database, "SELFCRAG_DATABASE_URL": database}
    with ExitStack() as stack:
        servers = [stack.enter_context(langgraph_dev(shared)) for _ in range(2)]
        for url in servers:
            assert asked(url, "How high is the highest tide of the year?")["decision"] == "abstain"
            assert asked(url, "How much does express shipping cost?")["citations"][0]["doc_id"] == "shipping"

        (tmp_path / "new").mkdir()
        (tmp_path / "new" / "tides.md").write_text(TIDES, encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "selfcrag.cli", "ingest", str(tmp_path / "new"), "--index",
                               database, "--append"], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr

        for url in servers:
            answer = asked(url, "How high is the highest tide of the year?")
            assert "7.5" in answer["answer"] and answer["citations"][0]["doc_id"] == "tides"
